//! Fixture `wrong_version`: a component built against a future version of
//! the contract (`sentinel:detector@0.9.0`); the host must refuse it at load
//! with the version it found and the versions it speaks named.

wit_bindgen::generate!({
    inline: "
        package sentinel:detector@0.9.0;

        interface detector {
            describe: func() -> string;
        }

        world detector-world {
            export detector;
        }
    ",
});

struct Future;

impl exports::sentinel::detector::detector::Guest for Future {
    fn describe() -> String {
        "wrong_version".into()
    }
}

export!(Future);
