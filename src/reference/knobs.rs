//! Test knobs: what makes the reference deliberately non-conforming, so that the harness's own
//! tests can check that each defect is caught. A [`Knobs`] value other than the default exists
//! only with the cargo feature `test-knobs` (which `cargo test` turns on through the package's
//! dev-dependency on itself, and with it `aocheck sut reference --variant`); a release build of
//! aocheck can only run the conforming reference.

use super::executor::Variant;
use crate::operator::connector::ConnectorDefect;

/// Which defects the reference carries: none, unless built with `test-knobs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    #[cfg(feature = "test-knobs")]
    variant: Variant,
    #[cfg(feature = "test-knobs")]
    connector: Option<ConnectorDefect>,
    #[cfg(feature = "test-knobs")]
    workflow: Option<crate::workflow::WorkflowDefect>,
}

impl Knobs {
    /// A broken reference: a domain variant and a connector defect (test builds only).
    #[cfg(feature = "test-knobs")]
    pub fn broken(variant: Variant, connector: Option<ConnectorDefect>) -> Knobs {
        Knobs {
            variant,
            connector,
            workflow: None,
        }
    }

    /// A broken workflow runner (test builds only).
    #[cfg(feature = "test-knobs")]
    pub fn workflow_broken(d: crate::workflow::WorkflowDefect) -> Knobs {
        Knobs {
            workflow: Some(d),
            ..Knobs::default()
        }
    }

    /// The workflow runner's defect (none without `test-knobs`).
    pub fn workflow(&self) -> Option<crate::workflow::WorkflowDefect> {
        #[cfg(feature = "test-knobs")]
        {
            self.workflow
        }
        #[cfg(not(feature = "test-knobs"))]
        {
            None
        }
    }

    /// The executor's variant (`conforming` without `test-knobs`).
    pub fn variant(&self) -> Variant {
        #[cfg(feature = "test-knobs")]
        {
            self.variant
        }
        #[cfg(not(feature = "test-knobs"))]
        {
            Variant::Conforming
        }
    }

    /// Whether the executor is this variant.
    pub fn is(&self, v: Variant) -> bool {
        self.variant() == v
    }

    /// The connector's defect (none without `test-knobs`).
    pub fn connector(&self) -> Option<ConnectorDefect> {
        #[cfg(feature = "test-knobs")]
        {
            self.connector
        }
        #[cfg(not(feature = "test-knobs"))]
        {
            None
        }
    }
}
