"""The travel database: schema, engine, generator, queries and the business rules."""
