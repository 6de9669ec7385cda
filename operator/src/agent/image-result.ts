// What the model gets for an image read_file returned. A model that accepts images sees the
// image itself (a file part in the tool result) beside a short text; any other model, or an
// image past the bounds, gets only that text: media type, size, pixel dimensions when the
// header tells them, and why the image is not shown. Sending the base64 as text instead
// would fill the context with characters the model cannot read, cut in the middle by the
// tool result bound. Only an answer of the image shape (isImageRead) whose content is base64
// (isImageData) is shown as an image; any other text, however it starts, goes as text. Pure.
//
// Bounds: the run state in Redis is saved after every tool call and holds the step's results,
// and the conversation is saved every step; so an image is shown up to IMAGE_RESULT_LIMIT_BYTES,
// at most IMAGES_PER_STEP per step, and only the newest tool message keeps its images
// (forgetImages): older ones become the same short text, and the model reads the file again
// to look again. The transcript keeps the text only.
import type { ModelMessage } from 'ai';

/** One shown image's raw size; the toolbox reads images up to 5 MiB, providers take about this much and more. */
export const IMAGE_RESULT_LIMIT_BYTES = 1024 * 1024;
/** Images shown per step; with the size bound, at most 4 MiB of images in a saved state. */
export const IMAGES_PER_STEP = 4;

/** The image a read_file answer carries, as the toolbox contract has it. */
export interface ImageRead {
  readonly path: string;
  readonly type: 'image';
  readonly mediaType: string;
  readonly bytes: number;
  /** Base64. */
  readonly content: string;
}

export interface ShownImage {
  readonly mediaType: string;
  /** Base64. */
  readonly data: string;
}

export type ImageResult = { readonly text: string; readonly image?: ShownImage };

export interface ImageResultInput {
  readonly read: ImageRead;
  /** The run's model accepts image inputs (provider registry, or spec.model.images). */
  readonly modelAcceptsImages: boolean;
  /** Images already shown in this step. */
  readonly shownThisStep: number;
}

/**
 * Whether an answer is an image read, as the contract has one. The answer is checked, not
 * trusted: code in the sandbox runs as the toolbox's user and can write a whole answer line
 * into its output, with any path, media type, size field and content.
 */
export function isImageRead(result: unknown): result is ImageRead {
  const read = result as Partial<ImageRead> | null;
  return (
    read?.type === 'image' &&
    typeof read.path === 'string' &&
    typeof read.mediaType === 'string' &&
    /^image\/[a-z0-9][a-z0-9.+-]{0,63}$/.test(read.mediaType) &&
    typeof read.bytes === 'number' &&
    typeof read.content === 'string'
  );
}

const SHOWN = 'shown below';
/** The end of a shown image's text (describeImage), where the note says it is shown. */
const SHOWN_NOTE = /: shown below\]$/;
const NOT_IMAGE_DATA = 'not shown: its content is not base64 image data';
// Base64 as the toolbox writes it (Buffer#toString('base64')): no blanks, padding only at the end.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function decideImageResult({ read, modelAcceptsImages, shownThisStep }: ImageResultInput): ImageResult {
  // The size the content decodes to, not the answer's own word for it.
  const bytes = Math.max(read.bytes, Math.floor((read.content.length * 3) / 4));
  const notShown = !modelAcceptsImages
    ? 'not shown: this model does not accept images'
    : bytes > IMAGE_RESULT_LIMIT_BYTES
      ? `not shown: images are shown up to ${IMAGE_RESULT_LIMIT_BYTES} bytes; make a smaller copy to look at it`
      : !isImageData(read.content)
        ? NOT_IMAGE_DATA
        : shownThisStep >= IMAGES_PER_STEP
          ? `not shown: at most ${IMAGES_PER_STEP} images are shown per step; read it again in a later step`
          : undefined;
  const text = describeImage(read, notShown ?? SHOWN);
  return notShown === undefined ? { text, image: { mediaType: read.mediaType, data: read.content } } : { text };
}

/**
 * Whether a shown image's data can go to the model as its bytes: non-empty base64. Checked
 * because the answer is not trusted (isImageRead), and the SDK refuses what is not: data that
 * starts with `data:` it takes for a data URL, which inline data must not be, and other text
 * fails its base64 decoding. It refuses while building the request, before every later model
 * call the tool message is in, so one forged answer stopped the run.
 */
export function isImageData(data: string): boolean {
  return data.length > 0 && data.length % 4 === 0 && BASE64.test(data);
}

/**
 * What of a kept result goes to the model: its image only when the data is base64
 * (isImageData); otherwise its text, saying the image is not shown. A result kept in the run
 * state is read back from Redis, where an older worker may have saved it unchecked.
 */
export function imageToSend(result: { readonly text: string; readonly image?: ShownImage | undefined }): ImageResult {
  if (result.image === undefined) return { text: result.text };
  if (isImageData(result.image.data)) return { text: result.text, image: result.image };
  return { text: result.text.replace(SHOWN_NOTE, `: ${NOT_IMAGE_DATA}]`) };
}

/** The short text standing for an image: `[image image/png, 1234 bytes, 640×480 px, a.png: shown below]`. */
export function describeImage(read: ImageRead, note: string): string {
  const size = imageDimensions(Buffer.from(read.content.slice(0, 64 * 1024), 'base64'));
  const dimensions = size ? `, ${size.width}×${size.height} px` : '';
  // A path is at most 4096 bytes on Linux; a longer one is not the toolbox's, and is cut.
  const path = read.path.length > 4096 ? `${read.path.slice(0, 4096)}…` : read.path;
  return `[image ${read.mediaType}, ${read.bytes} bytes${dimensions}, ${path}: ${note}]`;
}

/** Width and height from a PNG, GIF, JPEG or WebP header; undefined when it does not say. */
export function imageDimensions(bytes: Buffer): { width: number; height: number } | undefined {
  if (bytes.length >= 24 && bytes.readUInt32BE(0) === 0x89504e47) return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  if (bytes.length >= 10 && bytes.toString('latin1', 0, 3) === 'GIF')
    return { width: bytes.readUInt16LE(6), height: bytes.readUInt16LE(8) };
  if (bytes.length >= 30 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return webpSize(bytes);
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) return jpegSize(bytes);
  return undefined;
}

function webpSize(bytes: Buffer): { width: number; height: number } | undefined {
  const chunk = bytes.toString('latin1', 12, 16);
  if (chunk === 'VP8X') return { width: 1 + bytes.readUIntLE(24, 3), height: 1 + bytes.readUIntLE(27, 3) };
  if (chunk === 'VP8 ') return { width: bytes.readUInt16LE(26) & 0x3fff, height: bytes.readUInt16LE(28) & 0x3fff };
  if (chunk === 'VP8L' && bytes.length >= 25) {
    const bits = bytes.readUInt32LE(21);
    return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >> 14) & 0x3fff) };
  }
  return undefined;
}

// Walks the segments to the first start-of-frame marker, which holds the size.
function jpegSize(bytes: Buffer): { width: number; height: number } | undefined {
  let at = 2;
  while (at + 9 <= bytes.length && bytes[at] === 0xff) {
    const marker = bytes[at + 1]!;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) return { width: bytes.readUInt16BE(at + 7), height: bytes.readUInt16BE(at + 5) };
    at += 2 + bytes.readUInt16BE(at + 2);
  }
  return undefined;
}

/**
 * The conversation with every image replaced by its text, so the saved state and later
 * requests carry images of the newest tool message only. Messages without images are kept as
 * they are (same objects).
 */
export function forgetImages(messages: readonly ModelMessage[]): ModelMessage[] {
  return messages.map((message) => {
    if (message.role !== 'tool' || !message.content.some((part) => part.type === 'tool-result' && part.output.type === 'content'))
      return message;
    const content = message.content.map((part) => {
      if (part.type !== 'tool-result' || part.output.type !== 'content') return part;
      const texts = part.output.value.flatMap((item) => (item.type === 'text' ? [item.text] : []));
      const text = texts.join('\n').replace(/: shown below\]/g, ': no longer shown; read the file again to look at it]');
      return { ...part, output: { type: 'text' as const, value: text } };
    });
    return { ...message, content };
  });
}
