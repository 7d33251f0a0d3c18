"""The customer's language: gettext catalogs (Babel) and the choice per conversation."""
