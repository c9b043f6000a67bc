//! An injectable clock so backoff and delays are tested by moving time, not sleeping.
