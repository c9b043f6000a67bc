//! An in-process Kubernetes API server with real semantics, for tests, benchmarks and the demo.
