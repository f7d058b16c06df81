//! Reply encoders: placeholder, filled in below.
