"""An analysis as staff read it (the console's ``/analyze``, the handoff topic): a few lines."""

from bot.analysis.model import RequestAnalysis

_SENTIMENT = {"negative": "негативное", "neutral": "нейтральное", "positive": "позитивное"}
_URGENCY = {"low": "низкая", "normal": "обычная", "high": "высокая"}


def render_analysis(analysis: RequestAnalysis) -> list[str]:
    """The analysis in short labelled lines (Russian, for staff)."""
    lines = [
        f"Категория: {analysis.category}",
        f"Настроение: {_SENTIMENT.get(analysis.sentiment, analysis.sentiment)}"
        f" · срочность: {_URGENCY.get(analysis.urgency, analysis.urgency)}"
        f" · язык: {analysis.language}"
        f" · решено: {'да' if analysis.resolved else 'нет'}",
        f"Кратко: {analysis.summary}",
    ]
    if analysis.next_step:
        lines.append(f"Первый шаг: {analysis.next_step}")
    return lines
