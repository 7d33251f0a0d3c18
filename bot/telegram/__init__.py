"""The Telegram front end: aiogram dispatcher, handlers, middlewares, polling and webhook."""
