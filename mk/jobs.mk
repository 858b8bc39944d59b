# mk/jobs.mk — the job system's fuzz targets (the form fields of uploads and the OpenAI endpoint).
FUZZ_TARGETS += ./daemon/httpapi:FuzzJobForm
FUZZ_TARGETS += ./jobs/audiocut:FuzzParseWAV
