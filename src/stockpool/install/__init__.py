"""What puts stockpool's SQL into a database: deploy (migrations, functions,
roles, grants) and the schema dump."""
