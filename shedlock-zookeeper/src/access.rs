//! Who a session is, and who may touch the nodes it creates.
//!
//! Without credentials a session is anonymous and its nodes are open to every client of the
//! ensemble (`world:anyone`, all rights), as in ZooKeeper's own examples. With digest
//! credentials (`user:password`, ZooKeeper's `addauth digest`) the session authenticates when
//! it connects (and again after every reconnect), and every node it creates gets ZooKeeper's
//! `CREATOR_ALL_ACL`: all rights for that user, none for anyone else, not even reading. The
//! server stores the user with a hash of the password, never the password.

use std::fmt;

use shedlock_core::Error;
use zookeeper_client::{Acl, Acls, Client, Connector, CreateMode, CreateOptions, Permission};

/// Digest credentials as configured, checked by [`Access::new`].
#[derive(Clone)]
pub(crate) struct Digest {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Digest")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The credentials of a session and the ACL of the nodes it creates.
#[derive(Clone, Default)]
pub(crate) struct Access {
    /// `user:password`, as ZooKeeper's digest scheme reads it; `None`: anonymous.
    auth: Option<Vec<u8>>,
    user: Option<String>,
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Access")
            .field("digest_user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Access {
    /// Checks the credentials; `None` is an anonymous session.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`digest_user`, `digest_password`); the password is never
    /// quoted.
    pub(crate) fn new(digest: Option<&Digest>) -> Result<Self, Error> {
        let Some(Digest { user, password }) = digest else {
            return Ok(Access::default());
        };
        // ZooKeeper splits `user:password` at the first colon.
        if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) {
            return Err(Error::invalid_config(
                "digest_user",
                format!("must be non-empty, without `:` or control characters: {user:?}"),
            ));
        }
        if password.is_empty() {
            return Err(Error::invalid_config(
                "digest_password",
                "must not be empty",
            ));
        }
        Ok(Access {
            auth: Some(format!("{user}:{password}").into_bytes()),
            user: Some(user.clone()),
        })
    }

    /// Whether the session authenticates (and its nodes are closed to others).
    pub(crate) fn is_authenticated(&self) -> bool {
        self.auth.is_some()
    }

    /// A connector that authenticates the session, if there are credentials.
    pub(crate) fn connector(&self) -> Connector {
        let connector = Client::connector();
        match &self.auth {
            Some(auth) => connector.with_auth("digest", auth),
            None => connector,
        }
    }

    /// The ACL of every node this session creates.
    pub(crate) fn acls(&self) -> Acls<'static> {
        if self.is_authenticated() {
            Acls::creator_all()
        } else {
            Acls::anyone_all()
        }
    }

    /// Options for a persistent node (and the ancestors `mkdir` creates).
    pub(crate) fn persistent(&self) -> CreateOptions<'static> {
        CreateMode::Persistent.with_acls(self.acls())
    }

    /// Options for an election candidate's node.
    pub(crate) fn ephemeral_sequential(&self) -> CreateOptions<'static> {
        CreateMode::EphemeralSequential.with_acls(self.acls())
    }
}

/// Whether `acl` lets any client do more than read.
pub(crate) fn world_writable(acl: &[Acl]) -> bool {
    acl.iter().any(|entry| {
        // `READ.has(p)`: `p` is within reading.
        entry.scheme() == "world"
            && entry.id() == "anyone"
            && !Permission::READ.has(entry.permission())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(user: &str, password: &str) -> Digest {
        Digest {
            user: user.to_owned(),
            password: password.to_owned(),
        }
    }

    #[test]
    fn credentials_are_checked_naming_the_field_and_never_quoting_the_password() {
        let field = |d: Digest| match Access::new(Some(&d)) {
            Err(Error::InvalidConfig { field, message }) => {
                assert!(!message.contains("s3cret-pw"), "{message}");
                field
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(field(digest("", "s3cret-pw")), "digest_user");
        assert_eq!(field(digest("a:b", "s3cret-pw")), "digest_user");
        assert_eq!(field(digest("a\nb", "s3cret-pw")), "digest_user");
        assert_eq!(field(digest("app", "")), "digest_password");
        assert!(Access::new(Some(&digest("app", "with:colon"))).is_ok());
        assert!(!Access::new(None).unwrap().is_authenticated());
    }

    #[test]
    fn debug_output_never_holds_the_password() {
        let d = digest("billing", "s3cret-pw");
        let access = Access::new(Some(&d)).unwrap();
        for text in [
            format!("{d:?}"),
            format!("{access:?}"),
            format!("{access:#?}"),
        ] {
            assert!(text.contains("billing"), "{text}");
            assert!(!text.contains("s3cret-pw"), "{text}");
        }
    }

    #[test]
    fn nodes_are_open_without_credentials_and_creator_only_with_them() {
        assert_eq!(&*Access::default().acls(), &*Acls::anyone_all());
        let access = Access::new(Some(&digest("app", "pw"))).unwrap();
        assert_eq!(&*access.acls(), &*Acls::creator_all());
    }

    #[test]
    fn only_world_rights_beyond_reading_count_as_writable() {
        assert!(world_writable(&Acls::anyone_all()));
        assert!(!world_writable(&Acls::anyone_read()));
        assert!(!world_writable(&Acls::creator_all()));
        let some = [Acl::new(
            Permission::READ | Permission::CREATE,
            zookeeper_client::AuthId::anyone(),
        )];
        assert!(world_writable(&some));
    }
}
