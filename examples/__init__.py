"""The bundled example campaigns (data only), shipped inside the package so that the shipped
policy's overlay cases (``rules/tests/``) run from an installed kvrules, not only a checkout."""
