"""Route modules (thin: parse, authorise, call ``shared``)."""
