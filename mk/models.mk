# Models: the fuzz target of the models package joins `make fuzz`.
FUZZ_TARGETS += ./models:FuzzParseContentRange
