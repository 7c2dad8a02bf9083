# ruff: noqa: E501
"""Fixes in the existing families, each from a real reply a peer parser accepts.

Every accepted variant that strays from a family's grammar is a named repair (a notice) that
``strict`` refuses:

- a call at a line's start ends a thinking block the prompt opened (Qwen3.5):
  ``recovered-call-ended-thinking``;
- Qwen3-Coder's call without its opening ``<tool_call>``: ``recovered-unopened-call``;
- Hermes arguments written as a string holding their JSON: ``recovered-arguments-string``.

And the grammar itself: the model's own call ids (Mistral Nemo, Cohere), Cohere's thinking
and answer markers, Apriel 1.6's reasoning line. The llama.cpp parser tests for these
templates (``tests/test-chat.cpp``: reply in, message out) are kept as data below and read
by toolwire's families; arguments are compared once typed by the tool's schema, content and
reasoning without surrounding whitespace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from toolwire import (
    LlamaCppBackend,
    Request,
    get_family,
    load_template,
    prepare_arguments,
    stream_sync,
)
from toolwire.events import CallAbort, CallArgsDelta, CallEnd, CallStart, Notice
from toolwire.formats.base import ParseResult
from toolwire.formats.reasoning import opens_reasoning
from toolwire.pipeline import ModelMemory
from toolwire.testing import ScriptedLlama

from .test_formats import check_stream

FIXTURES = Path(__file__).parent / "fixtures" / "chat_templates"


class Case(NamedTuple):
    """One llama.cpp case: the template, the family that reads it, the reply, whether the
    generation prompt opened a thinking block, the tools, and what the reply holds."""

    template: str
    family: str
    reply: str
    opened: bool
    tools: tuple[str, ...]
    content: str
    reasoning: str
    calls: tuple[tuple[str, str, str], ...]  # (name, arguments JSON, id or "")


# fmt: off
LLAMACPP_CASES: list[Case] = [
    Case('Qwen3.5-4B', 'qwen-xml', "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', "I'm\nthinking\n</think>\n\n<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", True, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool', 'special_function_tool_with_optional_param'), '', '', (('special_function', '{"arg1": 1}', ''), ('special_function_with_opt', '{"arg1": 1, "arg2": 2}', ''))),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print("Hello, world!")\n\nhello()\n</parameter>\n</function>\n</tool_call>', False, ('python_tool',), '', '', (('python', '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=edit>\n<parameter=filename>\nfoo.c\n</parameter>\n<parameter=oldString>\n#iclunde\n</parameter>\n<parameter=newString>\n#include\n</parameter>\n</function>\n</tool_call>', False, ('edit_tool',), '', '', (('edit', '{"filename": "foo.c", "oldString": "#iclunde", "newString": "#include"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=edit>\n<parameter=filename>\nfoo.c\n</parameter>\n<parameter=oldString>\n#iclunde\n</parameter>\n<parameter=newString>\n#include\n\n</parameter>\n</function>\n</tool_call>', False, ('edit_tool',), '', '', (('edit', '{"filename": "foo.c", "oldString": "#iclunde", "newString": "#include\\n"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=python>\n<parameter=code>\n    print("Hello, world!")\n</parameter>\n</function>\n</tool_call>', False, ('python_tool',), '', '', (('python', '{"code": "    print(\\"Hello, world!\\")"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>', True, ('run_in_terminal_tool',), '', '', (('run_in_terminal', '{"command": "pwd"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', 'Need to inspect the current directory.\n<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>', True, ('run_in_terminal_tool',), '', 'Need to inspect the current directory.', (('run_in_terminal', '{"command": "pwd"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=empty_args>\n</function>\n</tool_call>', False, ('empty_args_tool',), '', '', (('empty_args', '{}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '<tool_call>\n<function=empty_args_no_props>\n</function>\n</tool_call>', False, ('empty_args_tool_no_properties',), '', '', (('empty_args_no_props', '{}', ''),)),
    # (llama.cpp keeps a <think> the model writes again inside the block its prompt opened as
    # reasoning; toolwire drops it as the template's own token, as Ollama's parsers do)
    Case('Qwen3.5-4B', 'qwen-xml', '<think>\n\n</think>\n\n<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>', True, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '</think>\n\n<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>', True, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '</think>\n\n<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>', True, ('run_in_terminal_tool',), '', '', (('run_in_terminal', '{"command": "pwd"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', '</think>\n\nLet me inspect the current directory.\n<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>', True, ('run_in_terminal_tool',), 'Let me inspect the current directory.\n', '', (('run_in_terminal', '{"command": "pwd"}', ''),)),
    Case('Qwen3.5-4B', 'qwen-xml', 'I should inspect the directory.\n</think>\n\nLet me inspect it now.\n<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>', True, ('run_in_terminal_tool',), 'Let me inspect it now.\n', 'I should inspect the directory.', (('run_in_terminal', '{"command": "pwd"}', ''),)),
    Case('mistralai-Ministral-3-14B-Reasoning-2512', 'mistral', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('mistralai-Ministral-3-14B-Reasoning-2512', 'mistral', "[THINK]I'm\nthinking[/THINK]Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('mistralai-Ministral-3-14B-Reasoning-2512', 'mistral', '[TOOL_CALLS]special_function[ARGS]{"arg1":1}', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('mistralai-Ministral-3-14B-Reasoning-2512', 'mistral', '[THINK]I\'m\nthinking[/THINK][TOOL_CALLS]special_function[ARGS]{"arg1":1}', False, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', ''),)),
    Case('mistralai-Ministral-3-14B-Reasoning-2512', 'mistral', '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 1, "arg2": 2}', False, ('special_function_tool', 'special_function_tool_with_optional_param'), '', '', (('special_function', '{"arg1": 1}', ''), ('special_function_with_opt', '{"arg1": 1, "arg2": 2}', ''))),
    Case('mistralai-Ministral-3-14B-Reasoning-2512', 'mistral', '[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more[/THINK][TOOL_CALLS]special_function[ARGS]{"arg1": 1}', False, ('special_function_tool',), '', 'Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more', (('special_function', '{"arg1": 1}', ''),)),
    Case('CohereForAI-c4ai-command-r7b-12-2024-tool_use', 'command-r7b', "<|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('CohereForAI-c4ai-command-r7b-12-2024-tool_use', 'command-r7b', "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>", False, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('CohereForAI-c4ai-command-r7b-12-2024-tool_use', 'command-r7b', '<|START_THINKING|>I\'m\nthinking<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n]<|END_ACTION|>', False, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', '0'),)),
    Case('CohereForAI-c4ai-command-r7b-12-2024-tool_use', 'command-r7b', '<|START_THINKING|><|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n]<|END_ACTION|>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', '0'),)),
    Case('Cohere2MoE', 'command-r7b', "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('Cohere2MoE', 'command-r7b', "<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>", True, (), "Hello, world!\nWhat's up?", '', ()),
    Case('Cohere2MoE', 'command-r7b', 'I\'m\nthinking<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n]<|END_ACTION|>', True, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', '0'),)),
    Case('Cohere2MoE', 'command-r7b', '<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n]<|END_ACTION|>', True, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', '0'),)),
    Case('Cohere2MoE', 'command-r7b', '<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "todo_list", "parameters": {"todos": ["buy milk", "walk dog"]}}\n]<|END_ACTION|>', True, ('todo_list',), '', '', (('todo_list', '{"todos": ["buy milk", "walk dog"]}', '0'),)),
    Case('Cohere2MoE', 'command-r7b', 'I\'m\nthinking<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}},\n    {"tool_call_id": "1", "tool_name": "python", "parameters": {"code": "print(\'hey\')"}}\n]<|END_ACTION|>', True, ('special_function_tool', 'python_tool'), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', '0'), ('python', '{"code": "print(\'hey\')"}', '1'))),
    Case('Cohere2MoE', 'command-r7b', "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello, world!\nWhat's up?<|END_TEXT|>", True, ('special_function_tool',), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use', 'hermes', '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use', 'hermes', 'Hello, world!\nWhat\'s up?<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>', False, ('special_function_tool',), "Hello, world!\nWhat's up?", '', (('special_function', '{"arg1": 1}', ''),)),
    Case('ibm-granite-granite-3.3-2B-Instruct', 'granite', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('ibm-granite-granite-3.3-2B-Instruct', 'granite', "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('ibm-granite-granite-4.0', 'hermes', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('ibm-granite-granite-4.0', 'hermes', '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('ibm-granite-granite-4.1', 'hermes', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('ibm-granite-granite-4.1', 'hermes', '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', 'Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool',), 'Let me call it.\n', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool', 'special_function_tool_with_optional_param'), '', '', (('special_function', '{"arg1": 1}', ''), ('special_function_with_opt', '{"arg1": 1, "arg2": 2}', ''))),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>', False, ('special_function_tool', 'special_function_tool_with_optional_param'), '', '', (('special_function', '{"arg1": 1}', ''), ('special_function_with_opt', '{"arg1": 1, "arg2": 2}', ''))),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print("Hello, world!")\n\nhello()\n</parameter>\n</function>\n</tool_call>', False, ('python_tool',), '', '', (('python', '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=python>\n<parameter=code>\n格\n</parameter>\n</function>\n</tool_call>', False, ('python_tool',), '', '', (('python', '{"code": "格"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=html>\n<parameter=markup>\n<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>\n</parameter>\n</function>\n</tool_call>', False, ('html_tool',), '', '', (('html', '{"markup": "<html>\\n <head>\\n  <title>Hello!</title>\\n </head>\\n</html>"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=todo_list>\n<parameter=todos>\n[{"item": "Check stuff", "selected": false}, {"item": "Prepare stuff", "selected": true}]\n</parameter>\n</function>\n</tool_call>', False, ('todo_list',), '', '', (('todo_list', '{"todos": [{"item": "Check stuff", "selected": false}, {"item": "Prepare stuff", "selected": true}]}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=edit>\n<parameter=newString>\n#include\n</parameter>\n<parameter=filename>\nfoo.c\n</parameter>\n<parameter=oldString>\n#iclunde\n</parameter>\n</function>\n</tool_call>', False, ('edit_tool',), '', '', (('edit', '{"newString": "#include", "filename": "foo.c", "oldString": "#iclunde"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=tool_2req_4opt>\n<parameter=req2>\n42\n</parameter>\n<parameter=req1>\nhello\n</parameter>\n<parameter=opt2>\n200\n</parameter>\n</function>\n</tool_call>', False, ('tool_2req_4opt',), '', '', (('tool_2req_4opt', '{"req2": 42, "req1": "hello", "opt2": 200}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=tool_2req_4opt>\n<parameter=req1>\nhello\n</parameter>\n<parameter=req2>\n42\n</parameter>\n<parameter=opt4>\n100\n</parameter>\n<parameter=opt2>\n200\n</parameter>\n</function>\n</tool_call>', False, ('tool_2req_4opt',), '', '', (('tool_2req_4opt', '{"req1": "hello", "req2": 42, "opt4": 100, "opt2": 200}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=tool_2req_5opt>\n<parameter=req1>\nworld\n</parameter>\n<parameter=req2>\n7\n</parameter>\n<parameter=opt5>\nlast\n</parameter>\n<parameter=opt3>\nmiddle\n</parameter>\n<parameter=opt1>\nfirst\n</parameter>\n</function>\n</tool_call>', False, ('tool_2req_5opt',), '', '', (('tool_2req_5opt', '{"req1": "world", "req2": 7, "opt5": "last", "opt3": "middle", "opt1": "first"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=tool_2req_5opt>\n<parameter=req1>\ntest\n</parameter>\n<parameter=req2>\n99\n</parameter>\n<parameter=opt3>\nc\n</parameter>\n<parameter=opt1>\na\n</parameter>\n<parameter=opt5>\ne\n</parameter>\n<parameter=opt4>\n4\n</parameter>\n<parameter=opt2>\n2\n</parameter>\n</function>\n</tool_call>', False, ('tool_2req_5opt',), '', '', (('tool_2req_5opt', '{"req1": "test", "req2": 99, "opt3": "c", "opt1": "a", "opt5": "e", "opt4": 4, "opt2": 2}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=set_nullable_str>\n<parameter=name>\nhello world\n</parameter>\n</function>\n</tool_call>', False, ('nullable_string_tool',), '', '', (('set_nullable_str', '{"name": "hello world"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=set_nullable_str_nf>\n<parameter=name>\nhello world\n</parameter>\n</function>\n</tool_call>', False, ('nullable_string_null_first_tool',), '', '', (('set_nullable_str_nf', '{"name": "hello world"}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=set_nullable_int>\n<parameter=count>\n42\n</parameter>\n</function>\n</tool_call>', False, ('nullable_int_tool',), '', '', (('set_nullable_int', '{"count": 42}', ''),)),
    Case('Qwen3-Coder', 'qwen-xml', '<tool_call>\n<function=set_unit>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>', False, ('enum_no_type_tool',), '', '', (('set_unit', '{"unit": "celsius"}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.1', 'deepseek-v3.1', '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"city": "XYZCITY"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>', False, ('get_time_tool',), '', '', (('get_time', '{"city":"XYZCITY"}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.1', 'deepseek-v3.1', 'REASONING</think>\nCONTENT', True, (), 'CONTENT', 'REASONING\n', ()),
    Case('deepseek-ai-DeepSeek-V3.1', 'deepseek-v3.1', 'CONTENT', False, (), 'CONTENT', '', ()),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', "I'm\nthinking</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', '<｜DSML｜function_calls>\n<｜DSML｜invoke name="special_function">\n<｜DSML｜parameter name="arg1" string="false">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Thinking about it</think>Let me call the function.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="special_function">\n<｜DSML｜parameter name="arg1" string="false">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('special_function_tool',), 'Let me call the function.', 'Thinking about it', (('special_function', '{"arg1": 1}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Test negative</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="magic_int">\n<｜DSML｜parameter name="ref" string="false">-14</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('magic_int_tool',), '', 'Test negative', (('magic_int', '{"ref": -14}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Test decimal</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="amount">\n<｜DSML｜parameter name="orig" string="false">3.14</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('amount_tool',), '', 'Test decimal', (('amount', '{"orig": 3.14}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Test boolean</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="toggle">\n<｜DSML｜parameter name="enabled" string="false">true</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('toggle_tool',), '', 'Test boolean', (('toggle', '{"enabled": true}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Test array</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="todo_list">\n<｜DSML｜parameter name="todos" string="false">["buy milk","walk dog"]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('todo_list',), '', 'Test array', (('todo_list', '{"todos": ["buy milk", "walk dog"]}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Test object</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="set_config">\n<｜DSML｜parameter name="config" string="false">{"theme":"dark","level":2}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('config_tool',), '', 'Test object', (('set_config', '{"config": {"theme": "dark", "level": 2}}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', '</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="city" string="true">XYZCITY</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('get_time_tool',), '', '', (('get_time', '{"city": "XYZCITY"}', ''),)),
    Case('deepseek-ai-DeepSeek-V3.2', 'deepseek-dsml', 'Multi-arg call</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="magic_int">\n<｜DSML｜parameter name="ref" string="false">42</｜DSML｜parameter>\n<｜DSML｜parameter name="name" string="true">foo bar</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>', True, ('magic_int_tool',), '', 'Multi-arg call', (('magic_int', '{"ref": 42, "name": "foo bar"}', ''),)),
    Case('deepseek-ai-DeepSeek-V4', 'deepseek-dsml', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('deepseek-ai-DeepSeek-V4', 'deepseek-dsml', "I'm\nthinking</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('deepseek-ai-DeepSeek-V4', 'deepseek-dsml', '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="special_function">\n<｜DSML｜parameter name="arg1" string="false">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('deepseek-ai-DeepSeek-V4', 'deepseek-dsml', 'Thinking about it</think>Let me call the function.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="special_function">\n<｜DSML｜parameter name="arg1" string="false">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>', True, ('special_function_tool',), 'Let me call the function.', 'Thinking about it', (('special_function', '{"arg1": 1}', ''),)),
    Case('deepseek-ai-DeepSeek-V4', 'deepseek-dsml', 'Multi-arg call</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="magic_int">\n<｜DSML｜parameter name="ref" string="false">42</｜DSML｜parameter>\n<｜DSML｜parameter name="name" string="true">foo bar</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>', True, ('magic_int_tool',), '', 'Multi-arg call', (('magic_int', '{"ref": 42, "name": "foo bar"}', ''),)),
    Case('deepseek-ai-DeepSeek-V4', 'deepseek-dsml', 'Let me check the time\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="city" string="true">Tokyo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>', True, ('get_time_tool',), '', 'Let me check the time', (('get_time', '{"city": "Tokyo"}', ''),)),
    Case('GLM-4.6', 'glm', '<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('GLM-4.7-Flash', 'glm', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('GLM-4.7-Flash', 'glm', "I'm\nthinking</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('GLM-4.7-Flash', 'glm', '<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('GLM-4.7-Flash', 'glm', "I'm\nthinking</think><tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>", True, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', ''),)),
    Case('GLM-4.7-Flash', 'glm', '<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call><tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1</arg_value><arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>', False, ('special_function_tool', 'special_function_tool_with_optional_param'), '', '', (('special_function', '{"arg1": 1}', ''), ('special_function_with_opt', '{"arg1": 1, "arg2": 2}', ''))),
    Case('GLM-4.7-Flash', 'glm', 'Let me read the diff content.</think><tool_call>read_file_diff_md</tool_call>', True, ('no_args_tool',), '', 'Let me read the diff content.', (('read_file_diff_md', '{}', ''),)),
    Case('Kimi-K2-Thinking', 'kimi-k2', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', 'functions.special_function:0'),)),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<think>I\'m thinking about this</think><|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool',), '', "I'm thinking about this", (('special_function', '{"arg1": 1}', 'functions.special_function:0'),)),
    Case('Kimi-K2-Thinking', 'kimi-k2', 'Hello, world!\nWhat\'s up?<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool',), "Hello, world!\nWhat's up?", '', (('special_function', '{"arg1": 1}', 'functions.special_function:0'),)),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_call_begin|>functions.special_function_with_opt:1<|tool_call_argument_begin|>{"arg1": 1, "arg2": 2}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool', 'special_function_tool_with_optional_param'), '', '', (('special_function', '{"arg1": 1}', 'functions.special_function:0'), ('special_function_with_opt', '{"arg1": 1, "arg2": 2}', 'functions.special_function_with_opt:1'))),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<think>I need to call two functions</think><|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{"code": "print(\'hey\')"}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool', 'python_tool'), '', 'I need to call two functions', (('special_function', '{"arg1": 1}', 'functions.special_function:0'), ('python', '{"code": "print(\'hey\')"}', 'functions.python:1'))),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<|tool_calls_section_begin|><|tool_call_begin|>functions.python:0<|tool_call_argument_begin|>{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}<|tool_call_end|><|tool_calls_section_end|>', False, ('python_tool',), '', '', (('python', '{"code": "def hello():\\n    print(\\"Hello, world!\\")\\n\\nhello()"}', 'functions.python:0'),)),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<|tool_calls_section_begin|><|tool_call_begin|>functions.empty_args:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>', False, ('empty_args_tool',), '', '', (('empty_args', '{}', 'functions.empty_args:0'),)),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{"code": "print(1)"}<|tool_call_end|><|tool_call_begin|>functions.html:2<|tool_call_argument_begin|>{"markup": "<p>test</p>"}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool', 'python_tool', 'html_tool'), '', '', (('special_function', '{"arg1": 1}', 'functions.special_function:0'), ('python', '{"code": "print(1)"}', 'functions.python:1'), ('html', '{"markup": "<p>test</p>"}', 'functions.html:2'))),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<think>I need to call two functions<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{"code": "print(\'hey\')"}<|tool_call_end|><|tool_calls_section_end|>', False, ('special_function_tool', 'python_tool'), '', 'I need to call two functions', (('special_function', '{"arg1": 1}', 'functions.special_function:0'), ('python', '{"code": "print(\'hey\')"}', 'functions.python:1'))),
    Case('Kimi-K2-Thinking', 'kimi-k2', '<think>I need to call two functions<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{"code": "print(\'hey\')"}', False, ('special_function_tool', 'python_tool'), '', 'I need to call two functions', (('special_function', '{"arg1": 1}', 'functions.special_function:0'), ('python', '{"code": "print(\'hey\')"}', 'functions.python:1'))),
    Case('moonshotai-Kimi-K2', 'kimi-k2', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('Kimi-K2-Instruct', 'kimi-k2', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('Apertus-8B-Instruct', 'apertus', '<|tools_prefix|>[{"special_function": {"arg1": 1}}]<|tools_suffix|>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('MiniMax-M2', 'minimax', "\n</think>\n\nHello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", '', ()),
    Case('MiniMax-M2', 'minimax', "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('MiniMax-M2', 'minimax', 'Let\'s call a tool:\n</think>\n\n<minimax:tool_call>\n<invoke name="empty_args">\n</invoke>\n</minimax:tool_call>', True, ('empty_args_tool',), '', "Let's call a tool:", (('empty_args', '{}', ''),)),
    Case('MiniMax-M2', 'minimax', '\n</think>\n\n<minimax:tool_call>\n<invoke name="special_function">\n<parameter name="arg1">1</parameter>\n</invoke>\n</minimax:tool_call>', True, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('NVIDIA-Nemotron-Nano-v2', 'nemotron-v2', 'I\'m\nthinking\n</think>\n<TOOLCALL>[{"name": "special_function", "arguments": {"arg1": 1}}]</TOOLCALL>', True, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', ''),)),
    Case('NVIDIA-Nemotron-Nano-v2', 'nemotron-v2', 'I\'m\nthinking\n</think>\n\n<TOOLCALL>[{"name": "special_function", "arguments": {"arg1": 1}}]</TOOLCALL>\n', True, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', ''),)),
    Case('CohereForAI-c4ai-command-r7b-12-2024-tool_use', 'command-r7b', "<|START_RESPONSE|>Hello, world!\nWhat's up?<|END_RESPONSE|>", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('CohereForAI-c4ai-command-r7b-12-2024-tool_use', 'command-r7b', '<|START_THINKING|>I\'m\nthinking<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n]<|END_ACTION|>', False, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1": 1}', '0'),)),
    Case('mistralai-Mistral-Nemo-Instruct-2407', 'mistral', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('mistralai-Mistral-Nemo-Instruct-2407', 'mistral', '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', '123456789'),)),
    Case('fireworks-ai-llama-3-firefunction-v2', 'firefunction', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('fireworks-ai-llama-3-firefunction-v2', 'firefunction', ' functools[{"name": "special_function", "arguments": {"arg1": 1}}]', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('deepseek-ai-DeepSeek-R1-Distill-Llama-8B', 'deepseek-r1', "</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", '', ()),
    Case('deepseek-ai-DeepSeek-R1-Distill-Llama-8B', 'deepseek-r1', "I'm\nthinking</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('llama-cpp-deepseek-r1', 'deepseek-r1', "</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", '', ()),
    Case('llama-cpp-deepseek-r1', 'deepseek-r1', "I'm\nthinking</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('llama-cpp-deepseek-r1', 'deepseek-r1', '</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{"arg1": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', True, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B', 'deepseek-r1', "</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", '', ()),
    Case('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B', 'deepseek-r1', "I'm\nthinking</think>Hello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B', 'deepseek-r1', '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{"arg1": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('unsloth-Apriel-1.5', 'apriel', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('unsloth-Apriel-1.5', 'apriel', '<tool_calls>[{"name": "special_function", "arguments": {"arg1": 1}}]</tool_calls>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Apriel-1.6-15b-Thinker-fixed', 'apriel', "I'm\nthinking\n[BEGIN FINAL RESPONSE]\nHello, world!\nWhat's up?", True, (), "Hello, world!\nWhat's up?", "I'm\nthinking", ()),
    Case('Apriel-1.6-15b-Thinker-fixed', 'apriel', 'I\'m\nthinking\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "special_function", "arguments": {"arg1": 1}}]</tool_calls>', True, ('special_function_tool',), '', "I'm\nthinking", (('special_function', '{"arg1":1}', ''),)),
    Case('unsloth-mistral-Devstral-Small-2507', 'mistral', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('unsloth-mistral-Devstral-Small-2507', 'mistral', '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('unsloth-mistral-Devstral-Small-2507', 'mistral', 'Hello, world!\nWhat\'s up?[TOOL_CALLS]special_function[ARGS]{"arg1": 1}', False, ('special_function_tool',), "Hello, world!\nWhat's up?", '', (('special_function', '{"arg1": 1}', ''),)),
    Case('meta-llama-Llama-3.1-8B-Instruct', 'llama3', "Hello, world!\nWhat's up?", False, ('special_function_tool',), "Hello, world!\nWhat's up?", '', ()),
    Case('meta-llama-Llama-3.2-3B-Instruct', 'llama3', "Hello, world!\nWhat's up?", False, ('special_function_tool',), "Hello, world!\nWhat's up?", '', ()),
    Case('meta-llama-Llama-3.3-70B-Instruct', 'llama3', "Hello, world!\nWhat's up?", False, ('python_tool',), "Hello, world!\nWhat's up?", '', ()),
    Case('NousResearch-Hermes-3-Llama-3.1-8B-tool_use', 'hermes', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('NousResearch-Hermes-3-Llama-3.1-8B-tool_use', 'hermes', '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
    Case('Qwen-Qwen2.5-7B-Instruct', 'hermes', "Hello, world!\nWhat's up?", False, (), "Hello, world!\nWhat's up?", '', ()),
    Case('Qwen-Qwen2.5-7B-Instruct', 'hermes', '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>', False, ('special_function_tool',), '', '', (('special_function', '{"arg1": 1}', ''),)),
]

TOOL_DEFS: dict[str, dict[str, Any]] = {'amount_tool': {'name': 'amount', 'description': 'Amount converter', 'parameters': {'type': 'object', 'properties': {'orig': {'type': 'number'}}, 'required': ['orig']}}, 'config_tool': {'name': 'set_config', 'description': 'Set configuration', 'parameters': {'type': 'object', 'properties': {'config': {'type': 'object', 'description': 'Configuration dict'}}, 'required': ['config']}}, 'edit_tool': {'name': 'edit', 'description': 'Edit file', 'parameters': {'type': 'object', 'properties': {'filename': {'type': 'string', 'description': 'Path of file to edit'}, 'oldString': {'type': 'string', 'description': 'String to replace'}, 'newString': {'type': 'string', 'description': 'New (replacement) value'}}, 'required': ['filename', 'oldString', 'newString']}}, 'empty_args_tool': {'name': 'empty_args', 'description': 'A tool that takes no arguments', 'parameters': {'type': 'object', 'properties': {}}}, 'empty_args_tool_no_properties': {'name': 'empty_args_no_props', 'description': 'A tool that takes no arguments and has no properties', 'parameters': {'type': 'object'}}, 'enum_no_type_tool': {'name': 'set_unit', 'description': 'Set a temperature unit', 'parameters': {'type': 'object', 'properties': {'unit': {'enum': ['celsius', 'fahrenheit'], 'description': 'Temperature unit'}}, 'required': ['unit']}}, 'get_time_tool': {'name': 'get_time', 'description': 'Get the current time in a city', 'parameters': {'type': 'object', 'properties': {'city': {'type': 'string', 'description': 'City name'}}, 'required': ['city']}}, 'html_tool': {'name': 'html', 'description': 'an html validator', 'parameters': {'type': 'object', 'properties': {'markup': {'type': 'string', 'description': 'HTML markup to validate.'}}, 'required': ['markup']}}, 'magic_int_tool': {'name': 'magic_int', 'description': 'Magic tool that takes a hash', 'parameters': {'type': 'object', 'properties': {'ref': {'type': 'integer'}, 'name': {'type': 'string'}}, 'required': ['ref']}}, 'no_args_tool': {'name': 'read_file_diff_md', 'description': 'Reads a file diff', 'parameters': {'type': 'object', 'properties': {'review_id': {'type': 'string'}, 'file_id': {'type': 'string'}}}}, 'nullable_int_tool': {'name': 'set_nullable_int', 'description': 'Set a nullable integer value', 'parameters': {'type': 'object', 'properties': {'count': {'type': ['integer', 'null'], 'description': 'A nullable integer'}}, 'required': ['count']}}, 'nullable_string_null_first_tool': {'name': 'set_nullable_str_nf', 'description': 'Set a nullable string value with null first in type array', 'parameters': {'type': 'object', 'properties': {'name': {'type': ['null', 'string'], 'description': 'A nullable string with null first'}}, 'required': ['name']}}, 'nullable_string_tool': {'name': 'set_nullable_str', 'description': 'Set a nullable string value', 'parameters': {'type': 'object', 'properties': {'name': {'type': ['string', 'null'], 'description': 'A nullable string'}}, 'required': ['name']}}, 'python_tool': {'name': 'python', 'description': 'an ipython interpreter', 'parameters': {'type': 'object', 'properties': {'code': {'type': 'string', 'description': 'Python code to execute.'}}, 'required': ['code']}}, 'run_in_terminal_tool': {'name': 'run_in_terminal', 'description': 'Run a shell command.', 'parameters': {'type': 'object', 'properties': {'command': {'type': 'string', 'description': 'Shell command to run'}}, 'required': ['command']}}, 'special_function_tool': {'name': 'special_function', 'description': "I'm special", 'parameters': {'type': 'object', 'properties': {'arg1': {'type': 'integer', 'description': 'The arg.'}}, 'required': ['arg1']}}, 'special_function_tool_with_optional_param': {'name': 'special_function_with_opt', 'description': "I'm special but have optional stuff", 'parameters': {'type': 'object', 'properties': {'arg1': {'type': 'integer', 'description': 'The arg.'}, 'arg2': {'type': 'integer', 'description': 'The optional arg.'}}, 'required': ['arg1']}}, 'todo_list': {'name': 'todo_list', 'description': 'Create or update the todo list', 'parameters': {'type': 'object', 'properties': {'todos': {'type': 'array', 'description': 'List of TODO list items'}}, 'required': ['todos']}}, 'toggle_tool': {'name': 'toggle', 'description': 'Toggle a feature', 'parameters': {'type': 'object', 'properties': {'enabled': {'type': 'boolean', 'description': 'Whether to enable the feature'}}, 'required': ['enabled']}}, 'tool_2req_4opt': {'name': 'tool_2req_4opt', 'description': 'Tool with 2 required and 4 optional params', 'parameters': {'type': 'object', 'properties': {'req1': {'type': 'string', 'description': 'Required string'}, 'req2': {'type': 'integer', 'description': 'Required int'}, 'opt1': {'type': 'string', 'description': 'Optional string 1'}, 'opt2': {'type': 'integer', 'description': 'Optional int 1'}, 'opt3': {'type': 'string', 'description': 'Optional string 2'}, 'opt4': {'type': 'integer', 'description': 'Optional int 2'}}, 'required': ['req1', 'req2']}}, 'tool_2req_5opt': {'name': 'tool_2req_5opt', 'description': 'Tool with 2 required and 5 optional params', 'parameters': {'type': 'object', 'properties': {'req1': {'type': 'string', 'description': 'Required string'}, 'req2': {'type': 'integer', 'description': 'Required int'}, 'opt1': {'type': 'string', 'description': 'Optional string 1'}, 'opt2': {'type': 'integer', 'description': 'Optional int 1'}, 'opt3': {'type': 'string', 'description': 'Optional string 2'}, 'opt4': {'type': 'integer', 'description': 'Optional int 2'}, 'opt5': {'type': 'string', 'description': 'Optional string 3'}}, 'required': ['req1', 'req2']}}}
# fmt: on


def tools_of(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": TOOL_DEFS[n]} for n in names]


def ids(i: int) -> str:
    return f"id{i}"


def read(case: Case, **kw: Any) -> ParseResult:
    return get_family(case.family).parse(
        case.reply, tools_of(case.tools) or None, reasoning_open=case.opened, make_id=ids, **kw
    )


def typed_args(call: Any, tools: list[dict[str, Any]]) -> Any:
    schema = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == call.name)
    raw = call.arguments_text if call.arguments_text.strip() else call.arguments
    return prepare_arguments(raw, schema, name=call.name, text_values=call.text_values).arguments


@pytest.mark.parametrize(
    "case",
    LLAMACPP_CASES,
    ids=[f"{c.template}-{i}" for i, c in enumerate(LLAMACPP_CASES)],
)
def test_llamacpp_case_is_read(case: Case) -> None:
    result = read(case)
    assert result.content.strip() == case.content.strip()
    assert result.reasoning.strip() == case.reasoning.strip()
    assert [c.name for c in result.calls] == [name for name, _, _ in case.calls]
    tools = tools_of(case.tools)
    for call, (_, args, call_id) in zip(result.calls, case.calls, strict=True):
        assert typed_args(call, tools) == json.loads(args)
        if call_id:
            assert call.id == call_id


@pytest.mark.parametrize(
    "template",
    sorted({c.template for c in LLAMACPP_CASES if (FIXTURES / f"{c.template}.jinja").exists()}),
)
def test_opened_is_what_the_template_prompt_does(template: str) -> None:
    """The cases' ``opened`` is the template's own generation prompt, with thinking on."""
    cases = [c for c in LLAMACPP_CASES if c.template == template]
    prompt = load_template(FIXTURES / f"{template}.jinja").render(
        [{"role": "user", "content": "hi"}],
        tools_of(("special_function_tool",)),
        enable_thinking=True,
        reasoning=True,  # Cohere2's name for it
        functions="",  # Firefunction's template needs these defined
        datetime="2026-01-01",
    )
    if opens_reasoning(prompt):
        assert any(c.opened for c in cases)
    else:
        assert not any(c.opened for c in cases)


_ONE_PER_FAMILY = {c.family: c for c in LLAMACPP_CASES if c.calls}


@pytest.mark.parametrize("case", list(_ONE_PER_FAMILY.values()), ids=list(_ONE_PER_FAMILY))
def test_llamacpp_case_streams_the_same_split_anywhere(case: Case) -> None:
    kw = {"tools": tools_of(case.tools) or None, "reasoning_open": case.opened}
    for cut in range(len(case.reply) + 1):
        check_stream(case.family, case.reply, [case.reply[:cut], case.reply[cut:]], **kw)
    check_stream(case.family, case.reply, list(case.reply), **kw)


# ----------------------------------------------------------------------------- repairs

RUN = {
    "name": "run_in_terminal",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}
F = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}
REPAIR_TOOLS = [{"type": "function", "function": RUN}, {"type": "function", "function": F}]
QWEN_CALL = (
    "<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n"
    "</function>\n</tool_call>"
)


def events_of(family: str, chunks: list[str], **kw: Any) -> list[Any]:
    s = get_family(family).stream(REPAIR_TOOLS, make_id=ids, **kw)
    out: list[Any] = []
    for chunk in chunks:
        out += s.feed(chunk)
    return out + s.finish()


def codes(events: list[Any]) -> list[str]:
    return [e.code for e in events if isinstance(e, Notice)]


def parsed(family: str, reply: str, **kw: Any) -> ParseResult:
    return get_family(family).parse(reply, REPAIR_TOOLS, make_id=ids, **kw)


@pytest.mark.parametrize("lead", ["", "Need to inspect the current directory.\n", "a\n\nb\n"])
def test_a_call_at_a_line_start_ends_thinking_the_prompt_opened(lead: str) -> None:
    reply = lead + QWEN_CALL + "\nDone."
    for chunks in ([reply], list(reply)):
        events = events_of("qwen-xml", chunks, reasoning_open=True)
        assert codes(events) == ["recovered-call-ended-thinking"]
        result = parsed("qwen-xml", reply, reasoning_open=True)
        assert [(c.name, c.arguments) for c in result.calls] == [
            ("run_in_terminal", {"command": "pwd"})
        ]
        assert result.reasoning == lead.removesuffix("\n")
        assert result.content.strip() == "Done."


def test_strict_keeps_a_call_inside_thinking_as_reasoning() -> None:
    reply = "Need to look.\n" + QWEN_CALL
    result = parsed("qwen-xml", reply, reasoning_open=True, strict=True)
    assert result.calls == [] and result.reasoning == reply and not result.notices


@pytest.mark.parametrize(
    ("reply", "opened"),
    [
        ("Thinking about <tool_call> mid-line.</think>Answer", True),  # not at a line's start
        ("<think>\n" + QWEN_CALL + "\n</think>Answer", False),  # a block the model opened
        ("[THINK]\n<tool_call>x</tool_call>[/THINK]Answer", False),
    ],
)
def test_a_call_marker_elsewhere_in_thinking_stays_reasoning(reply: str, opened: bool) -> None:
    result = parsed("qwen-xml", reply, reasoning_open=opened)
    assert result.calls == [] and not result.notices
    assert result.content == "Answer" and "tool_call" in result.reasoning


def test_a_call_ending_thinking_works_for_every_marker_family() -> None:
    """The rule is the reply stream's: GLM and Hermes (``<tool_call>``) and MiniMax too."""
    replies = {
        "hermes": '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>',
        "glm": "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
        "minimax": '<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
    }
    for family, call in replies.items():
        result = parsed(family, "I should call f.\n" + call, reasoning_open=True)
        assert [c.name for c in result.calls] == ["f"], family
        assert result.reasoning == "I should call f."
        assert (
            parsed(family, "I should call f.\n" + call, reasoning_open=True, strict=True).calls
            == []
        )


UNOPENED = (
    "Let me call it.\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n"
    "</function>\n</tool_call>"
)


def test_qwen_coder_call_without_its_opening_tag() -> None:
    for chunks in ([UNOPENED], list(UNOPENED)):
        events = events_of("qwen-xml", chunks)
        assert codes(events) == ["recovered-unopened-call"]
    result = parsed("qwen-xml", UNOPENED)
    assert result.content == "Let me call it.\n"
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("run_in_terminal", {"command": "pwd"})
    ]
    strict = parsed("qwen-xml", UNOPENED, strict=True)
    assert strict.calls == [] and strict.content == UNOPENED and not strict.notices


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        # with neither tag but ending the reply it is read (tests/test_families_peer_unseen.py)
        # a call announced, then withdrawn: the call the model began was not one
        (UNOPENED.replace("</tool_call>", "That is all."), "call-abandoned"),  # prose after it
        (UNOPENED.removesuffix("\n</function>\n</tool_call>"), "call-abandoned"),  # truncated
        (UNOPENED.replace("</tool_call>", "and then </tool_call>"), "call-abandoned"),
    ],
)
def test_an_unconfirmed_unopened_call_is_text_with_a_notice(reply: str, code: str) -> None:
    events = events_of("qwen-xml", [reply])
    assert not any(isinstance(e, CallEnd) for e in events)
    assert any(isinstance(e, CallAbort) for e in events) and codes(events) == [code]
    assert parsed("qwen-xml", reply).content == reply


@pytest.mark.parametrize(
    "reply",
    [
        "Write <function=x> in prose, </tool_call>.",
        "<function=undeclared>\n</function>\n</tool_call>",
        "<function=" + "n" * 10_000 + ">",
        "<function=",
    ],
)
def test_a_bare_function_tag_naming_no_tool_is_text_without_a_call(reply: str) -> None:
    events = events_of("qwen-xml", [reply])
    assert not any(isinstance(e, (CallStart, CallEnd)) for e in events)
    assert parsed("qwen-xml", reply).content == reply and not codes(events)


HERMES_STRING_ARGS = '<tool_call>\n{"name": "f", "arguments": "{\\"a\\": 1}"}\n</tool_call>'


def test_hermes_arguments_as_a_json_string() -> None:
    for chunks in ([HERMES_STRING_ARGS], list(HERMES_STRING_ARGS)):
        events = events_of("hermes", chunks)
        assert codes(events) == ["recovered-arguments-string"]
        deltas = "".join(e.text for e in events if isinstance(e, CallArgsDelta))
        (end,) = [e for e in events if isinstance(e, CallEnd)]
        assert deltas == end.call.arguments_text == '{"a": 1}'
        assert end.call.arguments == {"a": 1}
    check_stream("hermes", HERMES_STRING_ARGS, list(HERMES_STRING_ARGS), tools=REPAIR_TOOLS)
    strict = parsed("hermes", HERMES_STRING_ARGS, strict=True)
    assert strict.calls == [] and strict.content == HERMES_STRING_ARGS
    assert len(strict.notices) == 1 and "must be an object" in strict.notices[0]


@pytest.mark.parametrize("args", ['"[1, 2]"', '"not json"', '"{\\"a\\": NaN}"', '""'])
def test_hermes_string_arguments_that_hold_no_object_are_text(args: str) -> None:
    reply = '<tool_call>\n{"name": "f", "arguments": ' + args + "}\n</tool_call>"
    result = parsed("hermes", reply)
    assert result.calls == [] and result.content == reply and len(result.notices) == 1


# ----------------------------------------------------------------------------- ids

NEMO = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abc123def"}]'


def test_mistral_nemo_keeps_the_model_id() -> None:
    for chunks in ([NEMO], list(NEMO)):
        events = events_of("mistral", chunks)
        (start,) = [e for e in events if isinstance(e, CallStart)]
        (end,) = [e for e in events if isinstance(e, CallEnd)]
        assert start.id == end.call.id == "abc123def"
    check_stream("mistral", NEMO, list(NEMO), tools=REPAIR_TOOLS)


@pytest.mark.parametrize(
    ("items", "want"),
    [
        ('{"name": "f", "arguments": {"a": 1}}', ["id0"]),
        ('{"name": "f", "arguments": {"a": 1}, "id": ""}', ["id0"]),
        (
            '{"name": "f", "arguments": {}, "id": "x"}, {"name": "f", "arguments": {}, "id": "x"}',
            ["x", "id1"],
        ),
        ('{"name": "f", "arguments": {}, "id": "' + "i" * 300 + '"}', ["id0"]),
    ],
)
def test_a_model_id_is_kept_only_when_usable(items: str, want: list[str]) -> None:
    assert [c.id for c in parsed("mistral", "[TOOL_CALLS][" + items + "]").calls] == want


def test_a_model_id_that_is_not_a_string_is_no_call() -> None:
    reply = '[TOOL_CALLS][{"name": "f", "arguments": {}, "id": 7}]'
    result = parsed("mistral", reply)
    assert result.calls == [] and result.content == reply


COHERE = (
    '<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "call-7", '
    '"tool_name": "f", "parameters": {"a": 1}}\n]<|END_ACTION|>'
)


def test_cohere_keeps_its_tool_call_id_and_announces_with_it() -> None:
    for chunks in ([COHERE], list(COHERE)):
        events = events_of("command-r7b", chunks)
        (start,) = [e for e in events if isinstance(e, CallStart)]
        (end,) = [e for e in events if isinstance(e, CallEnd)]
        assert start.id == end.call.id == "call-7"
    check_stream("command-r7b", COHERE, list(COHERE), tools=REPAIR_TOOLS)
    assert parsed("command-r7b", COHERE).reasoning == "plan"


def test_an_id_written_after_the_name_does_not_change_the_announced_one() -> None:
    """Apriel and Cohere announce a call at its name: an id only written later is not the
    call's (the id announced and the id ended with are one)."""
    reply = '<|START_ACTION|>[{"tool_name": "f", "parameters": {"a": 1}, "tool_call_id": "late"}]<|END_ACTION|>'
    for chunks in ([reply], list(reply)):
        events = events_of("command-r7b", chunks)
        (start,) = [e for e in events if isinstance(e, CallStart)]
        (end,) = [e for e in events if isinstance(e, CallEnd)]
        assert start.id == end.call.id == "id0"


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        ("<|START_RESPONSE|>Hi there<|END_RESPONSE|>", "Hi there"),
        ("<|START_THINKING|>t<|END_THINKING|><|START_TEXT|>Hi<|END_TEXT|>", "Hi"),
        ("  <|START_RESPONSE|>Hi", "Hi"),  # cut off before its end
        ("<|START_RESPON", "<|START_RESPON"),
        ("Hi <|START_RESPONSE|>x<|END_RESPONSE|>", "Hi <|START_RESPONSE|>x<|END_RESPONSE|>"),
    ],
)
def test_cohere_answer_markers_are_not_text(reply: str, content: str) -> None:
    for chunks in ([reply], list(reply)):
        check_stream("command-r7b", reply, chunks, tools=REPAIR_TOOLS)
    assert parsed("command-r7b", reply).content == content


def test_apriel_reasoning_line_and_final_response_markers() -> None:
    reply = "I'm\nthinking\n[BEGIN FINAL RESPONSE]\nHello[END FINAL RESPONSE]"
    for chunks in ([reply], list(reply)):
        check_stream("apriel", reply, chunks, tools=REPAIR_TOOLS, reasoning_open=True)
    result = parsed("apriel", reply, reasoning_open=True)
    assert result.reasoning.strip() == "I'm\nthinking" and result.content == "Hello"
    # written by the model, the prompt's line is not thinking
    assert parsed("apriel", "Here are my reasoning steps: none.").content.startswith("Here")


# ----------------------------------------------------------------------------- pipeline


def test_the_pipeline_reads_with_the_requests_strict_setting() -> None:
    """One switch: a local model's reply read by its family, strict or not."""
    template = (FIXTURES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    reply = '<tool_call>\n{"name": "f", "arguments": "{\\"a\\": 1}"}\n</tool_call>'
    got = {}
    for strict in (False, True):
        backend = LlamaCppBackend(
            "scripted", llama=ScriptedLlama(template, reply), memory=ModelMemory()
        )
        request = Request([{"role": "user", "content": "f please"}], REPAIR_TOOLS, strict=strict)
        got[strict] = list(stream_sync(backend.stream(request)))
    assert [e.call.arguments for e in got[False] if isinstance(e, CallEnd)] == [{"a": 1}]
    assert "recovered-arguments-string" in codes(got[False])
    assert not any(isinstance(e, CallEnd) for e in got[True])
    assert "call-not-read" in codes(got[True])
