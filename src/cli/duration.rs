//! Durations on the command line: the library's parser, shared with annotations.

pub use autoregister::runtime::duration::parse;
