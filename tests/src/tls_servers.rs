//! Private servers configured for TLS as production ones are, with the certificates of a
//! [`Pki`]: each accepts TLS connections only and has a user that logs in with the client
//! certificate ([`CLIENT_NAME`]) or a password. Used by the stores' TLS tests and the CLI's.

use std::path::Path;

use shedlock_sqlx::sqlx::{self, Connection as _, Executor as _};

use crate::private_redis::PrivateRedis;
use crate::throwaway::{Flavor, Throwaway};
use crate::tls::{CLIENT_NAME, Pki};

/// The password of the Redis ACL user [`REDIS_USER`].
pub const REDIS_PASSWORD: &str = "s3cret-Pa55";
/// The Redis ACL user (the default user is off).
pub const REDIS_USER: &str = "locker";

/// A server certificate and key: the PKI's good one when `None`.
pub type CertKey<'a> = Option<(&'a Path, &'a Path)>;

/// A private Postgres with TLS from `cert_key`, accepting TLS connections only (`hostssl`):
/// `postgres` without a password, [`CLIENT_NAME`] by its certificate (`cert` authentication,
/// the role created with the rights to make tables in `public`). It also listens on
/// 127.0.0.2, an address the certificates do not name.
///
/// # Panics
///
/// When the server cannot be set up (see [`Throwaway::with_args_or_skip`]).
pub async fn postgres(pki: &Pki, cert_key: CertKey<'_>, test: &str) -> Option<Throwaway> {
    let user = Throwaway::server_user(Flavor::Postgres);
    let files = match cert_key {
        Some((cert, key)) => pki.server_files_from(cert, key, user),
        None => pki.server_files(user),
    }
    .expect("server files");
    let hba = files.cert.with_file_name("pg_hba.conf");
    std::fs::write(
        &hba,
        format!(
            "local all all trust\n\
             hostssl all {CLIENT_NAME} 127.0.0.0/8 cert\n\
             hostssl all {CLIENT_NAME} ::1/128 cert\n\
             hostssl all all 127.0.0.0/8 trust\n\
             hostssl all all ::1/128 trust\n"
        ),
    )
    .expect("pg_hba.conf");
    let mut args = files.postgres_args();
    args.extend([
        "-c".to_owned(),
        format!("hba_file={}", hba.display()),
        "-c".to_owned(),
        "listen_addresses=127.0.0.1,127.0.0.2,::1".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let pg = Throwaway::with_args_or_skip(Flavor::Postgres, &args, test).await?;
    if cert_key.is_none() {
        let admin = format!(
            "postgres://postgres@localhost:{}/test?sslmode=verify-full&sslrootcert={}",
            pg.port(),
            pki.ca.display()
        );
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .expect("postgres over TLS");
        conn.execute(sqlx::AssertSqlSafe(format!(
            "CREATE ROLE \"{CLIENT_NAME}\" LOGIN; GRANT ALL ON SCHEMA public TO \"{CLIENT_NAME}\""
        )))
        .await
        .expect("the certificate's role");
    }
    Some(pg)
}

/// A private MariaDB with TLS that refuses connections without it
/// (`require_secure_transport`), and a user [`CLIENT_NAME`] that must present the client
/// certificate (`REQUIRE SUBJECT`). It also listens on 127.0.0.2.
///
/// # Panics
///
/// When the server cannot be set up.
pub async fn mariadb(pki: &Pki, test: &str) -> Option<Throwaway> {
    let files = pki
        .server_files(Throwaway::server_user(Flavor::MariaDb))
        .expect("server files");
    let mut args = files.mariadb_args();
    args.push("--bind-address=127.0.0.1,127.0.0.2".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let db = Throwaway::with_args_or_skip(Flavor::MariaDb, &args, test).await?;
    let root = format!(
        "mysql://root@localhost:{}/test?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        db.port(),
        pki.ca.display()
    );
    let mut conn = sqlx::MySqlConnection::connect(&root)
        .await
        .expect("root over TLS");
    for statement in [
        format!("CREATE USER '{CLIENT_NAME}'@'%' REQUIRE SUBJECT '/CN={CLIENT_NAME}'"),
        format!("GRANT ALL ON test.* TO '{CLIENT_NAME}'@'%'"),
        "SET GLOBAL require_secure_transport = ON".to_owned(),
    ] {
        conn.execute(sqlx::AssertSqlSafe(statement))
            .await
            .expect("set up the server");
    }
    Some(db)
}

/// A private `redis-server` with TLS only, from `cert_key`, asking for client certificates as
/// `auth_clients` says (`no`, `optional`, `yes`), with the ACL user [`REDIS_USER`] /
/// [`REDIS_PASSWORD`] and the default user off.
///
/// # Panics
///
/// When the server cannot be started.
pub async fn redis(
    pki: &Pki,
    cert_key: CertKey<'_>,
    auth_clients: &str,
    test: &str,
) -> Option<PrivateRedis> {
    let files = match cert_key {
        Some((cert, key)) => pki.server_files_from(cert, key, None),
        None => pki.server_files(None),
    }
    .expect("server files");
    let mut args = files.redis_args(auth_clients);
    let password = format!(">{REDIS_PASSWORD}");
    for arg in [
        "--user", "default", "off", "--user", REDIS_USER, "on", &password, "~*", "&*", "+@all",
    ] {
        args.push(arg.to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    PrivateRedis::start_or_skip(&args, test).await
}
