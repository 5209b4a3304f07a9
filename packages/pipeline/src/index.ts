/** @skein/pipeline */
export {}
