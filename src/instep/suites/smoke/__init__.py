"""L0 (import/registry/collect smoke) and L1 (backend smoke) suites shipped with instep."""
