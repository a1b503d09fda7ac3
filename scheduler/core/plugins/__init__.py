"""Filter and score plugins, one concept per module, named after their upstream counterparts."""
