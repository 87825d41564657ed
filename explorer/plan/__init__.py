"""Planning one model: the offer, the planner walk, ranking and manual pinning."""
