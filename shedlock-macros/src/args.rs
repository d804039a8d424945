//! Parsing `#[scheduled_lock(...)]`'s arguments, checking each and their combinations.

use std::time::Duration;

use proc_macro2::{TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Lit, LitStr, Token};

use crate::errors::Errors;
use crate::name;

/// Every argument, in the order the messages list them.
pub(crate) const KEYS: [&str; 8] = [
    "name",
    "at_most",
    "at_least",
    "executor",
    "keep_alive",
    "every",
    "cron",
    "zone",
];

/// `shedlock_core::provider::MAX_DURATION` (365 days), repeated as this crate cannot depend on
/// `shedlock-core`, which re-exports it. The test `compile_time_limits_match_the_core` keeps the
/// two in step.
pub(crate) const MAX_DURATION: Duration = Duration::from_hours(365 * 24);

/// A duration argument, parsed at compile time.
pub(crate) struct DurationArg {
    pub(crate) value: Duration,
    /// The literal, for errors.
    pub(crate) lit: LitStr,
    /// Where the argument appears among the others, so cross-field errors go on the later one.
    position: usize,
}

/// The arguments that parsed. A missing value was either not given or reported in the [`Errors`]
/// returned alongside.
#[derive(Default)]
pub(crate) struct Args {
    /// The name template, if given and valid.
    pub(crate) name: Option<LitStr>,
    pub(crate) at_most: Option<DurationArg>,
    pub(crate) at_least: Option<DurationArg>,
    /// `at_most = <expr>` or `at_least = <expr>` other than a literal: a `Duration`. The compiler's
    /// types check it, and `LockConfig` checks it when the function is first called.
    pub(crate) at_most_expr: Option<Expr>,
    pub(crate) at_least_expr: Option<Expr>,
    pub(crate) executor: Option<Expr>,
    pub(crate) keep_alive: bool,
    /// `every`, or `cron` with `zone`. Literals are checked here, expressions when the job is made.
    pub(crate) schedule: Option<ScheduleArg>,
    /// Where the schedule was given, `every` or `cron`, for errors about the function.
    pub(crate) schedule_span: Option<proc_macro2::Span>,
}

/// A schedule argument. A literal is checked at compile time, an expression by `Schedule` when the
/// job is made.
pub(crate) enum ScheduleArg {
    /// A fixed rate.
    Every(Duration),
    /// A fixed rate given as a `Duration` expression.
    EveryExpr(Expr),
    /// A cron expression with seconds, and its IANA zone. The zone is UTC when not given.
    Cron {
        expression: Value,
        zone: Option<Value>,
    },
}

/// A string argument, given as a literal or as an expression. A literal is checked. An expression
/// is a `&str` or a `String`.
pub(crate) enum Value {
    Lit(String),
    Expr(Expr),
}

/// What a name template may refer to: the function's name and its named arguments.
pub(crate) struct NameScope<'a> {
    pub(crate) fn_name: &'a Ident,
    pub(crate) params: Vec<Ident>,
}

/// Parses `args`, the attribute's tokens, recording every problem in `errors` in source order.
/// `scope` checks the name template, `None` when the item is not a function. The returned `Args`
/// holds what could be understood, so the caller can still expand the function.
pub(crate) fn parse(args: TokenStream, scope: Option<&NameScope<'_>>, errors: &mut Errors) -> Args {
    let mut parsed = Parsed {
        scope,
        ..Parsed::default()
    };
    let parser = syn::meta::parser(|meta| parsed.argument(&meta.path, meta.input, errors));
    if let Err(error) = parser.parse2(args) {
        errors.push(error);
    }
    parsed.finish(errors)
}

/// What has been seen so far. Each key may be set once.
#[derive(Default)]
struct Parsed<'s> {
    scope: Option<&'s NameScope<'s>>,
    position: usize,
    /// Whether `name` was given, even with a bad value, or suggested for an unknown key, so that a
    /// missing name is not reported on top.
    name_mentioned: bool,
    name: Option<LitStr>,
    at_most: Option<DurationArg>,
    at_least: Option<DurationArg>,
    at_most_expr: Option<Expr>,
    at_least_expr: Option<Expr>,
    executor: Option<Expr>,
    keep_alive: Option<bool>,
    every: Option<DurationArg>,
    every_expr: Option<(Expr, usize)>,
    cron: Option<(LitStr, usize)>,
    cron_expr: Option<(Expr, usize)>,
    zone: Option<LitStr>,
    zone_expr: Option<Expr>,
    seen: Vec<String>,
}

impl Parsed<'_> {
    /// One `key`, `key = value` or `key(...)`. A wrong value is recorded and parsing goes on. An
    /// `Err` is a syntax error the rest cannot be recovered from, and stops parsing.
    fn argument(
        &mut self,
        path: &syn::Path,
        input: ParseStream<'_>,
        errors: &mut Errors,
    ) -> syn::Result<()> {
        self.position += 1;
        let Some(key) = path.get_ident() else {
            errors.at(path.span(), unknown_key_message(&path_text(path), None));
            return skip_value(input);
        };
        let key_text = key.to_string();
        if !KEYS.contains(&key_text.as_str()) {
            let suggestion = suggestion(&key_text);
            self.name_mentioned |= suggestion == Some("name");
            errors.at(key.span(), unknown_key_message(&key_text, suggestion));
            return skip_value(input);
        }
        self.name_mentioned |= key_text == "name";
        if self.seen.contains(&key_text) {
            errors.at(
                key.span(),
                format!("`{key}` is given twice; give each argument at most once"),
            );
            return skip_value(input);
        }
        self.seen.push(key_text.clone());
        if key_text == "keep_alive" {
            self.keep_alive = keep_alive(key, input, errors)?;
            return Ok(());
        }
        let Some(value) = value_of(key, input, errors)? else {
            return Ok(());
        };
        match key_text.as_str() {
            "name" => self.name = self.name_template(key, &value, errors),
            "at_most" if !matches!(value, Expr::Lit(_)) => self.at_most_expr = Some(value),
            "at_least" if !matches!(value, Expr::Lit(_)) => self.at_least_expr = Some(value),
            "every" if !matches!(value, Expr::Lit(_)) => {
                self.every_expr = Some((value, self.position));
            }
            "cron" if !matches!(value, Expr::Lit(_)) => {
                self.cron_expr = Some((value, self.position));
            }
            "zone" if !matches!(value, Expr::Lit(_)) => self.zone_expr = Some(value),
            "at_most" => self.at_most = self.duration(key, &value, errors),
            "at_least" => self.at_least = self.duration(key, &value, errors),
            "every" => self.every = self.every(key, &value, errors),
            "cron" => {
                self.cron = string(key, &value, "a cron expression with seconds", errors)
                    .filter(|lit| check_cron(lit, errors))
                    .map(|lit| (lit, self.position));
            }
            "zone" => {
                self.zone = string(key, &value, "an IANA time zone", errors)
                    .filter(|lit| check_zone(lit, errors));
            }
            _ => self.executor = Some(value),
        }
        Ok(())
    }

    fn name_template(&self, key: &Ident, value: &Expr, errors: &mut Errors) -> Option<LitStr> {
        let lit = string(key, value, "a lock name", errors)?;
        match self.scope {
            Some(scope) => name::check(&lit, scope.fn_name, &scope.params, errors).then_some(lit),
            None => Some(lit),
        }
    }

    fn duration(&self, key: &Ident, value: &Expr, errors: &mut Errors) -> Option<DurationArg> {
        let lit = string(key, value, "a duration like \"10m\"", errors)?;
        match shedlock_duration::parse(&lit.value()) {
            Ok(duration) if duration > MAX_DURATION => {
                errors.at(
                    lit.span(),
                    format!(
                        "`{key}` is {}, above the maximum of 365 days",
                        shedlock_duration::format(duration)
                    ),
                );
                None
            }
            Ok(value) => Some(DurationArg {
                value,
                lit,
                position: self.position,
            }),
            Err(error) => {
                errors.at(lit.span(), format!("`{key}`: {error}"));
                None
            }
        }
    }

    /// A fixed rate: a duration, not zero, in whole milliseconds.
    fn every(&self, key: &Ident, value: &Expr, errors: &mut Errors) -> Option<DurationArg> {
        let every = self.duration(key, value, errors)?;
        if every.value.is_zero() {
            errors.at(
                every.lit.span(),
                "`every` is zero: give the period, such as \"1m\"",
            );
            return None;
        }
        if !every.value.subsec_nanos().is_multiple_of(1_000_000) {
            errors.at(
                every.lit.span(),
                "`every` is not a whole number of milliseconds; fire instants are whole \
                 milliseconds",
            );
            return None;
        }
        Some(every)
    }

    /// Checks the arguments together.
    fn finish(self, errors: &mut Errors) -> Args {
        if !self.name_mentioned {
            errors.at(
                proc_macro2::Span::call_site(),
                "missing lock name: add `name = \"...\"`, such as \
                 `#[scheduled_lock(name = \"nightly-report\", at_most = \"10m\")]`",
            );
        }
        if let Some(at_most) = &self.at_most
            && at_most.value.is_zero()
        {
            errors.at(
                at_most.lit.span(),
                "`at_most` is zero: the lock would expire at once; give the longest time the \
                 task may run, such as \"10m\"",
            );
        }
        if let (Some(at_most), Some(at_least)) = (&self.at_most, &self.at_least)
            && !at_most.value.is_zero()
            && at_least.value > at_most.value
        {
            let later = if at_least.position > at_most.position {
                at_least
            } else {
                at_most
            };
            errors.at(
                later.lit.span(),
                format!(
                    "`at_least` ({}) is longer than `at_most` ({}); at_least must not exceed at_most",
                    shedlock_duration::format(at_least.value),
                    shedlock_duration::format(at_most.value)
                ),
            );
        }
        // Where each schedule argument is and its position, literal or expression.
        let every_at = self
            .every
            .as_ref()
            .map(|e| (e.lit.span(), e.position))
            .or_else(|| self.every_expr.as_ref().map(|(e, at)| (e.span(), *at)));
        let cron_at = self
            .cron
            .as_ref()
            .map(|(c, at)| (c.span(), *at))
            .or_else(|| self.cron_expr.as_ref().map(|(c, at)| (c.span(), *at)));
        if let (Some((every_span, every_at)), Some((cron_span, cron_at))) = (every_at, cron_at) {
            let later = if every_at > cron_at {
                every_span
            } else {
                cron_span
            };
            errors.at(later, "give one schedule: `every` or `cron`, not both");
        }
        let zone_span = self
            .zone
            .as_ref()
            .map(LitStr::span)
            .or_else(|| self.zone_expr.as_ref().map(Spanned::span));
        if let Some(zone_span) = zone_span
            && cron_at.is_none()
        {
            errors.at(
                zone_span,
                "`zone` goes with `cron` (a fixed rate `every` counts from the Unix epoch, in no zone)",
            );
        }
        let schedule_span = every_at.or(cron_at).map(|(span, _)| span);
        let zone = self
            .zone
            .map(|z| Value::Lit(z.value()))
            .or(self.zone_expr.map(Value::Expr));
        let cron = self
            .cron
            .map(|(c, _)| Value::Lit(c.value()))
            .or(self.cron_expr.map(|(c, _)| Value::Expr(c)));
        let every = self
            .every
            .map(|e| ScheduleArg::Every(e.value))
            .or(self.every_expr.map(|(e, _)| ScheduleArg::EveryExpr(e)));
        let schedule = match (every, cron) {
            (Some(every), None) => Some(every),
            (None, Some(expression)) => Some(ScheduleArg::Cron { expression, zone }),
            _ => None,
        };
        Args {
            name: self.name,
            at_most: self.at_most,
            at_least: self.at_least,
            at_most_expr: self.at_most_expr,
            at_least_expr: self.at_least_expr,
            executor: self.executor,
            keep_alive: self.keep_alive.unwrap_or(false),
            schedule,
            schedule_span,
        }
    }
}

const KEEP_ALIVE_VALUE: &str =
    "`keep_alive` is a flag: write `keep_alive` (or `keep_alive = true` / `keep_alive = false`)";

/// `keep_alive` alone, or `keep_alive = true|false`.
fn keep_alive(
    key: &Ident,
    input: ParseStream<'_>,
    errors: &mut Errors,
) -> syn::Result<Option<bool>> {
    if input.is_empty() || input.peek(Token![,]) {
        return Ok(Some(true));
    }
    if !input.peek(Token![=]) {
        errors.at(key.span(), KEEP_ALIVE_VALUE);
        skip_value(input)?;
        return Ok(None);
    }
    let Some(value) = value_of(key, input, errors)? else {
        return Ok(None);
    };
    if let Expr::Lit(syn::ExprLit {
        lit: Lit::Bool(flag),
        ..
    }) = &value
    {
        Ok(Some(flag.value()))
    } else {
        errors.at(value.span(), KEEP_ALIVE_VALUE);
        Ok(None)
    }
}

/// The `= value` after `key`. A missing `=` is recorded, and `Ok(None)` then means "skip this key".
fn value_of(key: &Ident, input: ParseStream<'_>, errors: &mut Errors) -> syn::Result<Option<Expr>> {
    if input.peek(Token![=]) {
        input.parse::<Token![=]>()?;
        return input.parse().map(Some);
    }
    let hint = match key.to_string().as_str() {
        "name" => "name = \"nightly-report\"",
        "at_most" => "at_most = \"10m\"",
        "at_least" => "at_least = \"30s\"",
        "every" => "every = \"1m\"",
        "cron" => "cron = \"0 0 3 * * *\"",
        "zone" => "zone = \"Europe/Berlin\"",
        _ => "executor = self.locks",
    };
    errors.at(key.span(), format!("`{key}` needs a value: `{hint}`"));
    skip_value(input)?;
    Ok(None)
}

/// The string literal `value`, or an error saying a string was expected.
fn string(key: &Ident, value: &Expr, what: &str, errors: &mut Errors) -> Option<LitStr> {
    if let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
        && lit.suffix().is_empty()
    {
        return Some(lit.clone());
    }
    errors.at(
        value.span(),
        format!("`{key}` takes a string literal: {what} in double quotes"),
    );
    None
}

/// Checks a cron expression as `shedlock_core::Schedule::cron_in` will, with `shedlock-cron`'s
/// check and words, prefixed as shedlock-core's schedule errors are.
fn check_cron(lit: &LitStr, errors: &mut Errors) -> bool {
    schedule_check(lit, shedlock_cron::parse(&lit.value()), errors)
}

/// Checks a time zone name against the tz database, as `Schedule::cron_in` will.
fn check_zone(lit: &LitStr, errors: &mut Errors) -> bool {
    schedule_check(lit, shedlock_cron::zone(&lit.value()), errors)
}

fn schedule_check<T>(
    lit: &LitStr,
    checked: Result<T, shedlock_cron::Invalid>,
    errors: &mut Errors,
) -> bool {
    match checked {
        Ok(_) => true,
        Err(invalid) => {
            errors.at(lit.span(), format!("invalid schedule: {invalid}"));
            false
        }
    }
}

/// Skips whatever follows an argument that was rejected, up to the next top-level comma.
fn skip_value(input: ParseStream<'_>) -> syn::Result<()> {
    while !input.is_empty() && !input.peek(Token![,]) {
        input.parse::<TokenTree>()?;
    }
    Ok(())
}

fn path_text(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

/// The valid key closest to a mistyped one, if it is close.
fn suggestion(key: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, k)| k)
}

fn unknown_key_message(key: &str, suggestion: Option<&str>) -> String {
    let expected = KEYS
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let suggestion = suggestion
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    format!("unknown argument `{key}`: expected one of {expected}{suggestion}")
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn parse_ok(tokens: TokenStream) -> Args {
        let mut errors = Errors::default();
        let args = parse(tokens, None, &mut errors);
        assert!(errors.is_empty(), "{:?}", errors.messages());
        args
    }

    fn parse_err(tokens: TokenStream) -> Vec<String> {
        let mut errors = Errors::default();
        let _ = parse(tokens, None, &mut errors);
        errors.messages()
    }

    #[test]
    fn parses_every_argument() {
        let args = parse_ok(quote!(
            name = "report-{tenant}",
            at_most = "10m",
            at_least = "PT15S",
            executor = self.locks,
            keep_alive,
        ));
        assert_eq!(
            args.name.map(|n| n.value()).as_deref(),
            Some("report-{tenant}")
        );
        assert_eq!(args.at_most.map(|d| d.value), Some(Duration::from_mins(10)));
        assert_eq!(
            args.at_least.map(|d| d.value),
            Some(Duration::from_secs(15))
        );
        assert!(args.executor.is_some());
        assert!(args.keep_alive);
    }

    #[test]
    fn defaults_when_left_out() {
        let args = parse_ok(quote!(name = "job"));
        assert!(args.at_most.is_none() && args.at_least.is_none() && args.executor.is_none());
        assert!(!args.keep_alive);
        assert!(!parse_ok(quote!(name = "job", keep_alive = false)).keep_alive);
        assert!(parse_ok(quote!(name = "job", keep_alive = true)).keep_alive);
        assert_eq!(parse_err(TokenStream::new()).len(), 1, "missing name");
    }

    #[test]
    fn reports_every_mistake_at_once() {
        let messages = parse_err(quote!(
            nmae = "x",
            at_most = "10 minutes",
            at_least = 5,
            keep_alive = "yes",
            name = "a",
            name = "b",
            executor,
        ));
        assert_eq!(messages.len(), 6, "{messages:#?}");
        assert!(
            messages[0].starts_with("unknown argument `nmae`: expected one of `name`, `at_most`")
        );
        assert!(messages[0].ends_with("did you mean `name`?"));
        assert!(
            messages[1].contains("invalid duration \"10 minutes\""),
            "{}",
            messages[1]
        );
        assert!(messages[2].contains("`at_least` takes a string literal"));
        assert!(messages[3].starts_with("`keep_alive` is a flag"));
        assert_eq!(
            messages[4],
            "`name` is given twice; give each argument at most once"
        );
        assert_eq!(
            messages[5],
            "`executor` needs a value: `executor = self.locks`"
        );
    }

    #[test]
    fn checks_durations_together() {
        let messages = parse_err(quote!(name = "a", at_most = "0s"));
        assert!(messages[0].starts_with("`at_most` is zero"), "{messages:?}");
        let messages = parse_err(quote!(name = "a", at_most = "10s", at_least = "1m"));
        assert_eq!(
            messages,
            ["`at_least` (1m) is longer than `at_most` (10s); at_least must not exceed at_most"]
        );
        let messages = parse_err(quote!(name = "a", at_most = "366d"));
        assert_eq!(
            messages,
            ["`at_most` is 366d, above the maximum of 365 days"]
        );
        parse_ok(quote!(name = "a", at_most = "365d", at_least = "365d"));
        parse_ok(quote!(name = "a", at_least = "1h"));
    }

    #[test]
    fn a_syntax_error_stops_with_what_was_parsed() {
        let mut errors = Errors::default();
        let args = parse(quote!(name = "a", at_most "1m"), None, &mut errors);
        assert_eq!(args.name.map(|n| n.value()).as_deref(), Some("a"));
        assert_eq!(errors.messages().len(), 1);
        let messages = parse_err(quote!(a::b = 1, name = "a"));
        assert!(
            messages[0].starts_with("unknown argument `a::b`: expected"),
            "{messages:?}"
        );
        let messages = parse_err(quote!(keep_alive(true), name = "a"));
        assert!(
            messages[0].starts_with("`keep_alive` is a flag"),
            "{messages:?}"
        );
    }

    #[test]
    fn missing_name_is_reported_once_and_only_when_no_name_was_attempted() {
        let missing = "missing lock name: add `name = \"...\"`";
        assert!(parse_err(quote!(at_most = "1m"))[0].starts_with(missing));
        let messages = parse_err(quote!(name = NAME));
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].starts_with("`name` takes a string literal"));
        let messages = parse_err(quote!(nmae = "a"));
        assert_eq!(messages.len(), 1, "{messages:?}");
        let messages = parse_err(quote!(label = "a"));
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[1].starts_with(missing));
    }

    #[test]
    fn the_name_is_checked_where_it_appears() {
        let fn_name = syn::parse_quote!(report);
        let scope = NameScope {
            fn_name: &fn_name,
            params: vec![syn::parse_quote!(tenant)],
        };
        let mut errors = Errors::default();
        let args = parse(
            quote!(at_most = "1x", name = "r-{tenat}", at_least = "1y"),
            Some(&scope),
            &mut errors,
        );
        assert!(args.name.is_none(), "an invalid template is not used");
        let messages = errors.messages();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[1].starts_with("`{tenat}` names no argument of `report`"));
        let mut errors = Errors::default();
        let args = parse(quote!(name = "r-{tenant}"), Some(&scope), &mut errors);
        assert!(errors.is_empty() && args.name.is_some());
    }

    #[test]
    fn schedules_take_literals_or_expressions() {
        let args = parse_ok(quote!(name = "a", cron = SYNC_CRON, zone = settings().zone));
        assert!(matches!(
            args.schedule,
            Some(ScheduleArg::Cron {
                expression: Value::Expr(_),
                zone: Some(Value::Expr(_))
            })
        ));
        let args = parse_ok(quote!(name = "a", cron = "0 0 3 * * *"));
        assert!(matches!(
            args.schedule,
            Some(ScheduleArg::Cron {
                expression: Value::Lit(_),
                zone: None
            })
        ));
        let args = parse_ok(quote!(name = "a", every = Duration::from_secs(60)));
        assert!(matches!(args.schedule, Some(ScheduleArg::EveryExpr(_))));
        assert!(args.schedule_span.is_some());
        assert_eq!(
            parse_err(quote!(name = "a", every = EVERY, cron = CRON)),
            ["give one schedule: `every` or `cron`, not both"]
        );
        assert_eq!(
            parse_err(quote!(name = "a", every = "1m", zone = ZONE)),
            [
                "`zone` goes with `cron` (a fixed rate `every` counts from the Unix epoch, in no zone)"
            ]
        );
    }

    #[test]
    fn a_literal_schedule_is_checked_with_the_run_time_words() {
        assert_eq!(
            parse_err(quote!(name = "a", cron = "0 0 25 * * *")),
            [
                "invalid schedule: cron \"0 0 25 * * *\": the hours field \"25\" is out of range 0-23"
            ]
        );
        assert_eq!(
            parse_err(quote!(name = "a", cron = "0 0 3 * * *", zone = "Nowhere")),
            [
                "invalid schedule: unknown time zone \"Nowhere\": use an IANA name such as \
                 \"Europe/Berlin\" or \"UTC\""
            ]
        );
    }

    #[test]
    fn edit_distance_is_levenshtein() {
        assert_eq!(edit_distance("name", "name"), 0);
        assert_eq!(edit_distance("nmae", "name"), 2);
        assert_eq!(edit_distance("at_mots", "at_most"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("keepalive", "keep_alive"), 1);
    }
}
