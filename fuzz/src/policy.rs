//! The policy TOML: any text either compiles to a policy or is refused with a reason.

use blackbox::Policy;

/// Parses the bytes as a policy file. A policy accepted is written back with
/// `Policy::to_toml`, which must read back to a policy written out the same way; an
/// error must say why.
pub fn policy_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Policy::from_toml_str(text) {
        Ok(policy) => {
            let written = policy.to_toml();
            let again = match Policy::from_toml_str(&written) {
                Ok(again) => again,
                Err(err) => panic!("the policy written back does not read: {err}\n{written}"),
            };
            assert_eq!(
                again.to_toml(),
                written,
                "the policy written back changed on a second reading"
            );
        }
        Err(err) => assert!(!err.to_string().is_empty(), "a refused policy must say why"),
    }
}
