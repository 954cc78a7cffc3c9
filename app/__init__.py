"""The wgattn demo server. `uvicorn app:main` serves it; the factory lives in app/server.py
(a submodule named app/main.py would replace this attribute when imported)."""

from .server import create_app

main = create_app()

__all__ = ["create_app", "main"]
