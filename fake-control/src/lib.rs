//! The control plane both provider simulators share (`fake-payments`, `fake-hermes`), and
//! nothing else: the harness never depends on it. It owns
//!
//! - [`holds`]: requests parked under a name until the control API releases them, and whether a
//!   parked request's client has gone;
//! - [`control`]: the `/_control` dialect (bearer control token, `{"error": {"code", "message"}}`,
//!   JSON bodies, the `release` and `holds` handlers);
//! - [`rules`]: targeted fault rules ("the nth … of the matching requests") and the checks every
//!   fault plan shares;
//! - [`serve`]: HTTP/1 serving where a fault can close a connection without a reply;
//! - [`bin`]: what both binaries do at start (read JSON files, bind, print the address);
//! - [`clock`]: the system clock or a discrete-event clock the harness drives;
//! - `bench` and `testing` (feature `testing`): the benchmark driver and the test helpers both
//!   fakes use.

#[cfg(feature = "testing")]
pub mod bench;
pub mod bin;
pub mod clock;
pub mod control;
pub mod holds;
pub use provider_model::rules;
pub use provider_model::targeted;
pub mod serve;
#[cfg(feature = "testing")]
pub mod testing;

pub use holds::{Holds, ReleaseAction};
pub use serve::{DropConn, serve};
