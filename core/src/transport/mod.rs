//! How the core talks to a server: the project's own wire client ([`wire`], with TLS in
//! [`tls`]), and the [`MysqlSession`] built on it ([`session`]), whose first run of a
//! statement carries its values as literals ([`literals`]) and which knows each text it
//! ran ([`statements`]). No lock protocol lives here: the lock kinds see a
//! [`crate::Session`].

mod literals;
mod session;
mod statements;
pub(crate) mod tls;
pub(crate) mod wire;

pub use session::{Authentication, MysqlSession};
pub use wire::{stalled as stopped_answering, During};
