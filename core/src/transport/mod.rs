//! How the core talks to a server: the project's own wire client ([`wire`], with TLS in
//! [`tls`]), the `mysql` crate as the fallback for what the wire client does not speak
//! ([`fallback`]), and the [`MysqlSession`] built on either ([`session`]), whose first
//! run of a statement carries its values as literals ([`literals`]) and which knows each
//! text it ran ([`statements`]). No lock protocol
//! lives here: the lock kinds see a [`crate::Session`].

mod fallback;
mod literals;
mod session;
mod statements;
pub(crate) mod tls;
pub(crate) mod wire;

pub use session::{Authentication, MysqlSession};
pub use wire::{stalled as stopped_answering, During};
