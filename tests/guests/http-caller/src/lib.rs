//! Hostile fixture `http_caller`: imports wasi:http/outgoing-handler, which any model call needs; the host must refuse it at load.

use sentinel_sdk::prelude::*;

struct Hostile;

impl Detector for Hostile {
    fn describe() -> Descriptor {
        Descriptor::new("http_caller", "0.0.1").emits("http_caller").subscribe("messages", "tool-failure")
    }

    fn start(_: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Hostile)
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        let headers = wasi::http::types::Fields::new();
        let request = wasi::http::types::OutgoingRequest::new(headers);
        let _ = request.set_authority(Some(&format!("api.example.com:{}", batch.rows())));
        let _ = wasi::http::outgoing_handler::handle(request, None);
        Ok(())
    }
}

sentinel_sdk::export_detector!(Hostile);
