#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "whisper.h"
#include "ggml-backend.h"
int main(int argc, char **argv) {
    ggml_backend_load_all();
    struct whisper_context_params p = whisper_context_default_params();
    p.use_gpu = 0;
    p.flash_attn = atoi(argv[2]);
    struct whisper_context *ctx = whisper_init_from_file_with_params(argv[1], p);
    if (!ctx) return 1;
    whisper_free(ctx);
    return 0;
}
