"""The local conformance test bed for kernels on subgroup matrices: README.md."""
