//! Which jobs a list shows: `?show=failing`, `paused` or `running`, on the jobs page and
//! `/api/jobs` alike.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::response::Response;
use serde::Deserialize;
use shedlock_core::admin::model::JobView;

use crate::failure::Failure;

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Show {
    #[default]
    All,
    Failing,
    Paused,
    Running,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Filter {
    #[serde(default)]
    show: Show,
}

impl Show {
    pub(crate) const ALL: [Self; 4] = [Self::All, Self::Failing, Self::Paused, Self::Running];

    pub(crate) fn keeps(self, job: &JobView) -> bool {
        match self {
            Self::All => true,
            Self::Failing => job.is_failing(),
            Self::Paused => job.paused.is_some(),
            Self::Running => job.held,
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Failing => "failing",
            Self::Paused => "paused",
            Self::Running => "running",
        }
    }
}

/// The query string, or a 400 that says what it takes.
impl<S: Send + Sync> FromRequestParts<S> for Show {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        Query::<Filter>::from_request_parts(parts, state)
            .await
            .map(|Query(f)| f.show)
            .map_err(|_| {
                Failure::bad_request("the query takes show=failing, show=paused or show=running")
                    .for_path(parts.uri.path())
            })
    }
}
