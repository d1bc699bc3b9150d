//! # sentinel-sdk
//!
//! Write a sentinel detector in Rust. Implement [`Detector`], call
//! [`export_detector!`] once, build for `wasm32-wasip2`: the result is a
//! component the host loads. You never touch the generated bindings.
//!
//! ```ignore
//! use sentinel_sdk::prelude::*;
//!
//! struct Expensive { threshold: f64 }
//!
//! impl Detector for Expensive {
//!     fn describe() -> Descriptor {
//!         Descriptor::new("expensive", env!("CARGO_PKG_VERSION"))
//!             .emits("cost")
//!             .subscribe("events", "turn.completed")
//!             .config_float("cost", 5.0, "USD above which one turn is reported")
//!     }
//!     fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
//!         Ok(Expensive { threshold: ctx.float("cost")? })
//!     }
//!     fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
//!         // read columns with batch.text / batch.int / batch.float ...
//!         Ok(())
//!     }
//! }
//!
//! sentinel_sdk::export_detector!(Expensive);
//! ```
//!
//! This crate owns the guest side of the WIT contract; it never performs I/O
//! (a detector has none) beyond the host's bounded `log`.

mod batch;
mod context;
mod describe;
pub mod failure;
pub mod normalize;
mod observe;
pub mod shell;

#[doc(hidden)]
pub mod __bindings {
    wit_bindgen::generate!({
        world: "detector-world",
        // `sdk/wit` links to the repository's `wit/`: `cargo package` copies the
        // WIT files into the package, so the crate builds on its own.
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_detector_world",
        default_bindings_module: "sentinel_sdk::__bindings",
    });
}

pub use batch::{Batch, Row};
pub use context::ScanContext;
pub use describe::Descriptor;
pub use observe::Observation;

pub use __bindings::sentinel::detector::types::{ConfigValue, DetectorError, Origin, Severity};

/// Everything a detector usually needs.
pub mod prelude {
    pub use crate::{
        Batch, ConfigValue, Descriptor, Detector, DetectorError, Observation, Origin, Row, ScanContext, Severity,
    };
}

/// Writes a line to the host's log (bounded per scan by the host).
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use __bindings::sentinel::detector::host;
        let level = match level {
            LogLevel::Debug => host::Level::Debug,
            LogLevel::Info => host::Level::Info,
            LogLevel::Warn => host::Level::Warn,
            LogLevel::Error => host::Level::Error,
        };
        host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// A detector: one value per scan, fed batches, asked for a decision.
pub trait Detector: Sized + 'static {
    /// Name, version, kinds emitted, subscriptions and config keys.
    fn describe() -> Descriptor;

    /// Starts a scan. Read config and state from `ctx`; fail with
    /// [`DetectorError::BadConfig`] when a value is unusable.
    fn start(ctx: &ScanContext) -> Result<Self, DetectorError>;

    /// Takes one batch. Push observations to `out` as soon as they are sure,
    /// or keep what you need and report in [`Detector::finish`].
    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError>;

    /// The decision at the end of the scan. Returns the state to keep for the
    /// next scan (`None` keeps nothing). The default reports nothing more.
    /// In a component the detector is not dropped after it (its memory goes
    /// with the scan's store, at once), so put nothing in a `Drop` that
    /// the scan needs done.
    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        let _ = out;
        Ok(None)
    }
}

#[doc(hidden)]
pub mod __private {
    use std::cell::RefCell;

    use super::__bindings::exports::sentinel::detector::detector as wit;
    use super::__bindings::sentinel::detector::types;
    use super::observe::pack;
    use super::{Batch, Detector, DetectorError, ScanContext};

    pub use wit::{Guest, GuestScan};

    /// The resource behind `scan`, wrapping the user's detector.
    pub struct ScanAdapter<D: Detector> {
        inner: RefCell<Option<D>>,
    }

    impl<D: Detector> GuestScan for ScanAdapter<D> {
        fn push(&self, batch: types::Batch) -> Result<types::Observations, DetectorError> {
            let batch = Batch::new(batch).map_err(DetectorError::BadInput)?;
            let mut inner = self.inner.borrow_mut();
            let det = inner.as_mut().ok_or_else(|| DetectorError::Failed("push after finish".into()))?;
            let mut out = Vec::new();
            det.push(&batch, &mut out)?;
            Ok(pack(&out))
        }

        fn finish(&self) -> Result<types::ScanOutput, DetectorError> {
            let mut det =
                self.inner.borrow_mut().take().ok_or_else(|| DetectorError::Failed("finish called twice".into()))?;
            let mut out = Vec::new();
            let state = det.finish(&mut out);
            let output = state.map(|state| types::ScanOutput { observations: pack(&out), state });
            release(det);
            output
        }
    }

    /// Lets go of a detector after its `finish`. In a component nothing runs
    /// after it: the host drops the store, and the instance's memory with
    /// it, at once. Dropping the detector there would free its every
    /// allocation one by one inside the fire decision's time (a detector
    /// that keeps groups frees each group's), for memory about to go anyway.
    /// Natively (tests, the benchmark's twin) it is dropped as usual.
    fn release<D>(det: D) {
        #[cfg(target_arch = "wasm32")]
        std::mem::forget(det);
        #[cfg(not(target_arch = "wasm32"))]
        drop(det);
    }

    /// The normalizer's gate window tests and the secret rules' key words
    /// over `t`, as bits: read as the gates read them and by their
    /// references, one window at a time and the key words' table (equal on
    /// every line). For the guest fixture `window-check`, which checks them
    /// in wasm.
    pub fn window_tests(t: &[u8]) -> (u32, u32) {
        crate::normalize::window_tests(t)
    }

    /// Whether the gates read sixteen bytes at a time in this build (SSE2
    /// on x86_64, `simd128` on wasm32), so that `window_tests` compares two
    /// different codes.
    pub const WINDOWS_IN_VECTORS: bool = crate::normalize::VECTORS;

    /// How many observations a packed record holds (for the benchmark's twin).
    pub fn count(o: &types::Observations) -> usize {
        o.count as usize
    }

    pub fn describe<D: Detector>() -> types::Descriptor {
        D::describe().into_wit()
    }

    pub fn start<D: Detector>(ctx: types::ScanContext) -> Result<ScanAdapter<D>, DetectorError> {
        let ctx = ScanContext::from_wit(ctx);
        Ok(ScanAdapter { inner: RefCell::new(Some(D::start(&ctx)?)) })
    }
}

/// Exports a [`Detector`] as the component's `sentinel:detector/detector`.
/// Call it once, at the crate root of a `cdylib`.
#[macro_export]
macro_rules! export_detector {
    ($detector:ty) => {
        #[doc(hidden)]
        #[allow(dead_code)]
        struct __SentinelComponent;

        impl $crate::__private::Guest for __SentinelComponent {
            type Scan = $crate::__private::ScanAdapter<$detector>;

            fn describe() -> $crate::__bindings::sentinel::detector::types::Descriptor {
                $crate::__private::describe::<$detector>()
            }

            fn start(
                ctx: $crate::__bindings::sentinel::detector::types::ScanContext,
            ) -> ::core::result::Result<
                $crate::__bindings::exports::sentinel::detector::detector::Scan,
                $crate::DetectorError,
            > {
                $crate::__private::start::<$detector>(ctx)
                    .map($crate::__bindings::exports::sentinel::detector::detector::Scan::new)
            }
        }

        // Only a component exports the WIT names; a native build (tests,
        // benchmarks) links the same logic without them.
        #[cfg(target_arch = "wasm32")]
        $crate::__bindings::__export_detector_world!(__SentinelComponent with_types_in $crate::__bindings);
    };
}
