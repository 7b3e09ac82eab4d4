//! The library names option fields in its messages (`` `check_tokens` ``); the command line
//! says the flag that sets each (`--check-tokens`). This is the one place that maps them.

/// The flag that sets the library option `field`: a nested field (`adamw.beta1`) is set by
/// the flag of its last part, and underscores become dashes.
pub fn flag(field: &str) -> String {
    let last = field.rsplit('.').next().unwrap_or(field);
    format!("--{}", last.replace('_', "-"))
}

/// A library message as the command line says it: every field named as its flag.
pub fn with_flags(line: &str) -> String {
    orthoformer::error::name_fields(line, flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_written_as_flags() {
        assert_eq!(flag("check_tokens"), "--check-tokens");
        assert_eq!(flag("adamw.beta1"), "--beta1");
        assert_eq!(
            with_flags("`min_lr` must be between 0 and `lr`"),
            "--min-lr must be between 0 and --lr"
        );
    }
}
