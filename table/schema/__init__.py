"""A table's schema over time: schema instants (:mod:`.change`: create, add-columns) and
``t.update_schema()`` (:mod:`.update`: add anywhere, rename, drop, widen by field id)."""
