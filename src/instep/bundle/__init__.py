"""Evidence bundles: everything the owner of the next layer needs to reproduce one failing
case or batch without the original environment (seed 000, Appendix B)."""
