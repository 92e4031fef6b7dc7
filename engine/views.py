"""Views of the engine app live beside what they serve: the console in engine/console/."""
