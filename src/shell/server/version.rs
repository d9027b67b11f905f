//! The module's version: the crate's semantic version (`Cargo.toml`), shown by `MODULE LIST` as
//! one integer (`ver` = major·10000 + minor·100 + patch) and by `INFO ratelimit` as text
//! (`ratelimit_version:x.y.z`).

/// The semantic version, `major.minor.patch`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version as `MODULE LIST` reports it: major·10000 + minor·100 + patch.
pub const MODULE_VERSION: i32 = decimal(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
    + decimal(env!("CARGO_PKG_VERSION_MINOR")) * 100
    + decimal(env!("CARGO_PKG_VERSION_PATCH"));

/// A version component's digits as a number (evaluated at compile time; a non-digit or a
/// component of 100 or more — which would not fit the encoding — fails the build).
const fn decimal(digits: &str) -> i32 {
    let bytes = digits.as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        assert!(b.is_ascii_digit(), "version components are decimal numbers");
        n = n * 10 + (b - b'0') as i32;
        i += 1;
    }
    assert!(n < 100, "minor and patch must stay below 100 for MODULE LIST's encoding");
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_version_encodes_the_crate_version() {
        let parts: Vec<i32> = VERSION.split('.').map(|p| p.parse().unwrap_or(-1)).collect();
        assert_eq!(parts.len(), 3, "{VERSION}");
        assert_eq!(MODULE_VERSION, parts[0] * 10_000 + parts[1] * 100 + parts[2]);
        assert_eq!(decimal("0"), 0);
        assert_eq!(decimal("42"), 42);
    }
}
