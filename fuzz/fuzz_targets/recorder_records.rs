#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| blackbox_fuzz::recorder_records(data));
