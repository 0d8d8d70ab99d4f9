//! Nothing to build: this script exists so that the package's `syn` build-dependency (see
//! Cargo.toml) takes part in feature resolution, which keeps `make purity` and the npm package
//! build on one compiled core.

fn main() {}
