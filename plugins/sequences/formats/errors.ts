/** a file that cannot be read as the format it claims; the message names where (line, element) */
export class SequenceFormatError extends Error {}

export const xmlText = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '')
/** EDL fields and comments hold no line breaks or tabs */
export const oneLine = (s: string) => s.replace(/\r\n|\r|\n|\t/g, ' ')
