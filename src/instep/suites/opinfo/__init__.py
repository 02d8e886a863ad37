"""L5: the OpInfo differential suite over the installed torch's ``op_db``."""
