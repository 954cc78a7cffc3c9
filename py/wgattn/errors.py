"""wgattn's exceptions, so that callers classify an error by its type, never by its message.

    WgattnError(ValueError)      bad input the project refuses (ValueError: callers that catch
      CompileError                 ValueError, the API's 422 included, keep working)
        WGSL that does not compile or link on this adapter (native pipeline creation; the page's
        executor throws its JS twin, static/webgpu.js CompileError)
      InterfaceMismatch
        a kernel (or an interface module's plan) that does not match its interface in the
        registry: a Params field or a binding missing, unknown or misplaced
      DoesNotFit
        a plan that exceeds this adapter's limits (buffer sizes, workgroup storage, invocations)

The module needs nothing but Python 3.8 (the page imports it under Pyodide).
"""

__all__ = ["WgattnError", "CompileError", "InterfaceMismatch", "DoesNotFit"]


class WgattnError(ValueError):
    """Bad input wgattn refuses; the message says what failed and what is allowed."""


class CompileError(WgattnError):
    """WGSL that does not compile or link: nothing else will run with it."""


class InterfaceMismatch(WgattnError):
    """A kernel or plan that does not match its interface's registry entry."""


class DoesNotFit(WgattnError):
    """A plan that exceeds the adapter's limits: another implementation or smaller sizes may fit."""
