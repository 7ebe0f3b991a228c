"""Development tooling, run from a checkout (`python -m dev.…`): screening training and held-out
sets, the benchmarks that tune the defaults on the project's own data, and recorded results. Not
part of the package: the wheel holds `app` only."""
