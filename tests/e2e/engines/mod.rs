//! Real inference servers and the mocks other projects ship: llama.cpp, vLLM, the PyPI mocks.

mod aws_sdk;
mod llama_cpp;
mod llama_cpp_answers;
mod llama_cpp_long_prompts;
mod llama_cpp_protocols;
mod llama_cpp_script;
mod llama_cpp_turns;
mod pypi_llmock;
mod pypi_mocks;
mod vllm;
