//! Fixture `wrong_version`: a component built against a future version of
//! the contract (`sentinel:detector@0.2.0`); the host must refuse it at load
//! with both versions named.

wit_bindgen::generate!({
    inline: "
        package sentinel:detector@0.2.0;

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
