"""A custom_imports module whose own import fails (a package that is not installed): bad input, one line."""

import regtrain_missing_dependency  # noqa: F401
