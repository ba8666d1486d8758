/** Text as HTML shows it, whatever it holds (a scenario's title, a file's name): the five characters that could start markup, as character references. */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
