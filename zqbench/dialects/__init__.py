"""Protocol dialects: build requests and parse responses for one API family."""
