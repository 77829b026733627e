//! Ownership, extended attributes and ACLs, as the archive gives them and this system takes
//! them: names to ids (owner.rs), which attributes are restored (xattrs.rs), ACL text to the
//! kernel's form (acl.rs).

pub mod acl;
pub mod owner;
pub mod xattrs;
