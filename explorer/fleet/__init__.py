"""Many models on one fleet: demands, the placement planner, manual plans and their text."""
