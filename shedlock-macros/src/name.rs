//! Lock name templates: `"report-{tenant}"`, checked against the function's arguments.

use syn::{Ident, LitStr};

use crate::errors::Errors;

/// `shedlock_core::provider::DEFAULT_MAX_NAME_LEN`, the longest lock name Java ShedLock's table
/// holds. The test `compile_time_limits_match_the_core` keeps the two in step.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// A piece of a name template.
#[derive(Debug, PartialEq, Eq)]
enum Segment {
    /// Text, unescaped (`{{` is `{`).
    Text(String),
    /// `{arg}`.
    Arg(String),
}

/// Checks the name template `lit` against `params`, the arguments the function can format,
/// recording every problem in `errors` on the literal, and returns whether it is valid. A valid
/// template's placeholders are all implicit captures of `params`, so the expansion passes the
/// literal itself to `format_args!`, and rustc reports a non-`Display` argument inside it.
pub(crate) fn check(lit: &LitStr, fn_name: &Ident, params: &[Ident], errors: &mut Errors) -> bool {
    let span = lit.span();
    let before = errors.len();
    let template = lit.value();
    if template.is_empty() {
        errors.at(
            span,
            "the lock name is empty; name the task, such as \"nightly-report\"",
        );
        return false;
    }
    let segments = segments(&template, errors, span);
    for segment in &segments {
        let Segment::Arg(arg) = segment else { continue };
        if params.iter().any(|p| p == arg) {
            continue;
        }
        if syn::parse_str::<Ident>(arg).is_err() {
            errors.at(
                span,
                format!(
                    "`{{{arg}}}` is not a placeholder this macro understands: write an \
                     argument's name in braces, such as `{{{}}}` (formatted with `Display`)",
                    params
                        .first()
                        .map_or_else(|| "tenant".to_owned(), ToString::to_string)
                ),
            );
        } else if params.is_empty() {
            errors.at(
                span,
                format!(
                    "`{{{arg}}}` names no argument: `{fn_name}` has no arguments the lock name \
                     can use"
                ),
            );
        } else {
            let usable = params
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ");
            errors.at(
                span,
                format!(
                    "`{{{arg}}}` names no argument of `{fn_name}`; the lock name can use {usable}"
                ),
            );
        }
    }
    check_fixed_text(&segments, errors, span);
    errors.len() == before
}

/// Splits `template` into text and placeholders, recording malformed braces.
fn segments(template: &str, errors: &mut Errors, span: proc_macro2::Span) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut text = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut arg = String::new();
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    arg.push(c);
                }
                if !closed {
                    errors.at(
                        span,
                        "unclosed `{` in the lock name: close the placeholder with `}`, or write \
                         `{{` for a literal `{`",
                    );
                    break;
                }
                if arg.is_empty() {
                    errors.at(
                        span,
                        "empty placeholder `{}` in the lock name: write the name of an argument \
                         in the braces, such as `{tenant}`",
                    );
                    continue;
                }
                if !text.is_empty() {
                    segments.push(Segment::Text(std::mem::take(&mut text)));
                }
                segments.push(Segment::Arg(arg));
            }
            '}' => errors.at(
                span,
                "unmatched `}` in the lock name: write `}}` for a literal `}`",
            ),
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        segments.push(Segment::Text(text));
    }
    segments
}

/// Checks what can be checked before the arguments are known: length, padding, NUL.
fn check_fixed_text(segments: &[Segment], errors: &mut Errors, span: proc_macro2::Span) {
    let fixed: usize = segments
        .iter()
        .map(|s| match s {
            Segment::Text(text) => text.chars().count(),
            Segment::Arg(_) => 0,
        })
        .sum();
    let templated = segments.iter().any(|s| matches!(s, Segment::Arg(_)));
    if fixed > MAX_NAME_LEN {
        errors.at(
            span,
            if templated {
                format!(
                    "the fixed text of the lock name is already {fixed} characters long; a lock \
                     name has at most {MAX_NAME_LEN}"
                )
            } else {
                format!(
                    "the lock name is {fixed} characters long; a lock name has at most \
                     {MAX_NAME_LEN}"
                )
            },
        );
    }
    if let Some(Segment::Text(first)) = segments.first()
        && first.starts_with(char::is_whitespace)
    {
        errors.at(span, "the lock name starts with white space");
    }
    if let Some(Segment::Text(last)) = segments.last()
        && last.ends_with(char::is_whitespace)
    {
        errors.at(span, "the lock name ends with white space");
    }
    if segments
        .iter()
        .any(|s| matches!(s, Segment::Text(text) if text.contains('\0')))
    {
        errors.at(span, "the lock name contains a NUL character");
    }
}

#[cfg(test)]
mod tests {
    use proc_macro2::Span;

    use super::*;

    fn ident(s: &str) -> Ident {
        Ident::new(s, Span::call_site())
    }

    fn check_str(template: &str, params: &[&str]) -> Vec<String> {
        let params: Vec<Ident> = params.iter().map(|p| ident(p)).collect();
        let mut errors = Errors::default();
        let ok = check(
            &LitStr::new(template, Span::call_site()),
            &ident("report"),
            &params,
            &mut errors,
        );
        assert_eq!(ok, errors.is_empty());
        errors.messages()
    }

    #[test]
    fn splits_text_and_placeholders() {
        let mut errors = Errors::default();
        assert_eq!(
            segments("a-{x}{{b}}-{y}", &mut errors, Span::call_site()),
            [
                Segment::Text("a-".into()),
                Segment::Arg("x".into()),
                Segment::Text("{b}-".into()),
                Segment::Arg("y".into()),
            ]
        );
        assert!(errors.is_empty());
    }

    #[test]
    fn accepts_valid_templates() {
        assert!(check_str("report", &[]).is_empty());
        assert!(check_str("report-{tenant}-{day}", &["tenant", "day"]).is_empty());
        assert!(check_str("{tenant}", &["tenant"]).is_empty());
        assert!(check_str("{{literal}}", &[]).is_empty());
        assert!(check_str(&"x".repeat(MAX_NAME_LEN), &[]).is_empty());
        assert!(check_str("{a} padded by args {a}", &["a"]).is_empty());
    }

    #[test]
    fn rejects_unknown_and_malformed_placeholders() {
        assert_eq!(
            check_str("report-{tenat}", &["tenant", "day"]),
            ["`{tenat}` names no argument of `report`; the lock name can use `tenant`, `day`"]
        );
        assert_eq!(
            check_str("report-{tenant}", &[]),
            ["`{tenant}` names no argument: `report` has no arguments the lock name can use"]
        );
        assert!(check_str("r-{x:?}", &["x"])[0].contains("`{x:?}` is not a placeholder"));
        assert!(check_str("r-{0}", &["x"])[0].contains("such as `{x}`"));
        assert!(check_str("r-{}", &["x"])[0].starts_with("empty placeholder"));
        assert!(check_str("r-{x", &["x"])[0].starts_with("unclosed `{`"));
        assert!(check_str("r-}x", &["x"])[0].starts_with("unmatched `}`"));
        assert_eq!(
            check_str("{a}{b}", &[]).len(),
            2,
            "every mistake is reported"
        );
    }

    #[test]
    fn rejects_names_no_store_accepts() {
        assert!(check_str("", &[])[0].starts_with("the lock name is empty"));
        assert_eq!(
            check_str(&"x".repeat(65), &[]),
            ["the lock name is 65 characters long; a lock name has at most 64"]
        );
        assert!(
            check_str(&format!("{}{{t}}", "x".repeat(65)), &["t"])[0]
                .starts_with("the fixed text of the lock name is already 65")
        );
        // Escaped braces count once, placeholders not at all.
        assert!(check_str(&format!("{}{{{{{{t}}", "x".repeat(63)), &["t"]).is_empty());
        assert_eq!(
            check_str(" job", &[]),
            ["the lock name starts with white space"]
        );
        assert_eq!(
            check_str("job\t", &[]),
            ["the lock name ends with white space"]
        );
        assert!(check_str("{t} ", &["t"])[0].contains("ends with white space"));
        assert_eq!(
            check_str("a\0b", &[]),
            ["the lock name contains a NUL character"]
        );
    }
}
