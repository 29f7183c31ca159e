"""The onnx backend cases graphc refuses, by the reason it gives (tests/test_onnx_backend_suite.py
checks each refusal against its pattern). Written by tests/record_onnx_refusals.py from a run of
tests/onnx_backend_run.py; edit by rerunning it, not by hand."""

PASS_FLOOR = 1867  # cases that pass (of 2024)

# reason -> (the pattern graphc's message matches, the cases)
REFUSALS = {
    "input '…' is not a tensor of a dtype graphc holds (tensor_type, STRING)": (
        "input '[^']*' is not a tensor of a dtype graphc holds \\(tensor_type, STRING\\)",
        [
            'test_ai_onnx_ml_label_encoder_string_int',
            'test_ai_onnx_ml_label_encoder_string_int_no_default',
            'test_ai_onnx_ml_label_encoder_tensor_mapping',
            'test_ai_onnx_ml_label_encoder_tensor_value_only_mapping',
            'test_equal_string',
            'test_equal_string_broadcast',
            'test_regex_full_match_basic',
            'test_regex_full_match_email_domain',
            'test_regex_full_match_empty',
            'test_string_concat',
            'test_string_concat_broadcasting',
            'test_string_concat_empty_string',
            'test_string_concat_utf8',
            'test_string_concat_zero_dimensional',
            'test_string_split_basic',
            'test_string_split_consecutive_delimiters',
            'test_string_split_empty_string_delimiter',
            'test_string_split_empty_tensor',
            'test_string_split_maxsplit',
            'test_string_split_no_delimiter',
            'test_strnorm_model_monday_casesensintive_lower',
            'test_strnorm_model_monday_casesensintive_nochangecase',
            'test_strnorm_model_monday_casesensintive_upper',
            'test_strnorm_model_monday_empty_output',
            'test_strnorm_model_monday_insensintive_upper_twodim',
            'test_strnorm_model_nostopwords_nochangecase',
            'test_strnormalizer_export_monday_casesensintive_lower',
            'test_strnormalizer_export_monday_casesensintive_nochangecase',
            'test_strnormalizer_export_monday_casesensintive_upper',
            'test_strnormalizer_export_monday_empty_output',
            'test_strnormalizer_export_monday_insensintive_upper_twodim',
            'test_strnormalizer_nostopwords_nochangecase',
        ]),
    "input '…' is not a tensor of a dtype graphc holds (sequence_type, element type #)": (
        "input '[^']*' is not a tensor of a dtype graphc holds \\(sequence_type, element type \\d+\\)",
        [
            'test_identity_sequence',
            'test_loop13_seq',
            'test_optional_get_element_sequence',
            'test_sequence_insert_at_back',
            'test_sequence_insert_at_front',
            'test_sequence_map_add_1_sequence_1_tensor',
            'test_sequence_map_add_1_sequence_1_tensor_expanded',
            'test_sequence_map_add_2_sequences',
            'test_sequence_map_add_2_sequences_expanded',
            'test_sequence_map_extract_shapes',
            'test_sequence_map_extract_shapes_expanded',
            'test_sequence_map_identity_1_sequence',
            'test_sequence_map_identity_1_sequence_1_tensor',
            'test_sequence_map_identity_1_sequence_1_tensor_expanded',
            'test_sequence_map_identity_1_sequence_expanded',
            'test_sequence_map_identity_2_sequences',
            'test_sequence_map_identity_2_sequences_expanded',
        ]),
    "op '…' of domain '…' is not supported (graphc imports the domains '…', '…', '…')": (
        "op '[^']*' of domain '[^']*' is not supported \\(graphc imports the domains '[^']*', '[^']*', '[^']*'\\)",
        [
            'test_flexattention',
            'test_flexattention_causal_mask',
            'test_flexattention_diff_head_sizes',
            'test_flexattention_double',
            'test_flexattention_fp16',
            'test_flexattention_gqa',
            'test_flexattention_prob_mod',
            'test_flexattention_relative_positional',
            'test_flexattention_scaled',
            'test_flexattention_score_mod',
            'test_flexattention_soft_cap',
        ]),
    'no reader for ONNX op NonMaxSuppression': (
        "ONNX op 'NonMaxSuppression'\\-\\d+ is not supported",
        [
            'test_nonmaxsuppression_center_point_box_format',
            'test_nonmaxsuppression_flipped_coordinates',
            'test_nonmaxsuppression_identical_boxes',
            'test_nonmaxsuppression_iou_threshold_boundary',
            'test_nonmaxsuppression_limit_output_size',
            'test_nonmaxsuppression_single_box',
            'test_nonmaxsuppression_suppress_by_IOU',
            'test_nonmaxsuppression_suppress_by_IOU_and_scores',
            'test_nonmaxsuppression_two_batches',
            'test_nonmaxsuppression_two_classes',
        ]),
    'no reader for ONNX op ImageDecoder': (
        "ONNX op 'ImageDecoder'\\-\\d+ is not supported",
        [
            'test_image_decoder_decode_bmp_rgb',
            'test_image_decoder_decode_jpeg2k_rgb',
            'test_image_decoder_decode_jpeg_bgr',
            'test_image_decoder_decode_jpeg_grayscale',
            'test_image_decoder_decode_jpeg_rgb',
            'test_image_decoder_decode_png_rgb',
            'test_image_decoder_decode_pnm_rgb',
            'test_image_decoder_decode_tiff_rgb',
            'test_image_decoder_decode_webp_rgb',
        ]),
    "input '…' is not a tensor of a dtype graphc holds (optional_type, element type #)": (
        "input '[^']*' is not a tensor of a dtype graphc holds \\(optional_type, element type \\d+\\)",
        [
            'test_identity_opt',
            'test_loop16_seq_none',
            'test_optional_get_element_optional_sequence',
            'test_optional_get_element_optional_tensor',
            'test_optional_has_element_empty_optional_input',
            'test_optional_has_element_optional_input',
            'test_optional_has_element_tensor_input',
        ]),
    'no reader for ONNX op TfIdfVectorizer': (
        "ONNX op 'TfIdfVectorizer'\\-\\d+ is not supported",
        [
            'test_tfidfvectorizer_tf_batch_onlybigrams_skip0',
            'test_tfidfvectorizer_tf_batch_onlybigrams_skip5',
            'test_tfidfvectorizer_tf_batch_uniandbigrams_skip5',
            'test_tfidfvectorizer_tf_only_bigrams_skip0',
            'test_tfidfvectorizer_tf_onlybigrams_levelempty',
            'test_tfidfvectorizer_tf_onlybigrams_skip5',
            'test_tfidfvectorizer_tf_uniandbigrams_skip5',
        ]),
    'Attention on float# inputs is not imported yet (its softmax precision)': (
        'Attention on float\\d+ inputs is not imported yet \\(its softmax precision\\)',
        [
            'test_attention_24_qk_matmul_output_mode3_softmax_precision',
            'test_attention_4d_causal_fp16',
            'test_attention_4d_fp16',
            'test_attention_4d_gqa_causal_nonpad_decode_fp16',
            'test_attention_4d_gqa_with_past_and_present_fp16',
            'test_attention_local_window_ext_cache_float16_mask',
        ]),
    'Attention on bfloat# inputs is not imported yet (its softmax precision)': (
        'Attention on bfloat\\d+ inputs is not imported yet \\(its softmax precision\\)',
        [
            'test_attention_3d_causal_bf16',
            'test_attention_4d_attn_mask_causal_bf16',
            'test_attention_4d_causal_bf16',
            'test_attention_4d_causal_padded_kv_bf16',
            'test_attention_4d_padded_kv_bf16',
        ]),
    "Loop with scan outputs and a trip count computed at run time: the scan outputs'…'s shapes are static apart from the batch dim": (
        "Loop with scan outputs and a trip count computed at run time: the scan outputs'[^']*'s shapes are static apart from the batch dim",
        [
            'test_loop11',
            'test_range_bfloat16_type_positive_delta_expanded',
            'test_range_float16_type_positive_delta_expanded',
            'test_range_float_type_positive_delta_expanded',
            'test_range_int32_type_negative_delta_expanded',
        ]),
    "BitCast from float# to INT#: graphc reinterprets the bits of integer types only (it has no op that views a float's bits)": (
        "BitCast from float\\d+ to INT\\d+: graphc reinterprets the bits of integer types only \\(it has no op that views a float's bits\\)",
        [
            'test_bitcast_2d_float32_to_int32',
            'test_bitcast_float32_to_int32',
            'test_bitcast_float64_to_int64',
            'test_bitcast_scalar_float32_to_int32',
        ]),
    'Dropout in training mode: an imported model is an inference plan': (
        'Dropout in training mode: an imported model is an inference plan',
        [
            'test_training_dropout',
            'test_training_dropout_default',
            'test_training_dropout_default_mask',
            'test_training_dropout_mask',
        ]),
    'no reader for ONNX op DeformConv': (
        "ONNX op 'DeformConv'\\-\\d+ is not supported",
        [
            'test_basic_deform_conv_with_padding',
            'test_basic_deform_conv_without_padding',
            'test_deform_conv_with_mask_bias',
            'test_deform_conv_with_multiple_offset_groups',
        ]),
    "GridSample with mode='…' is not imported by graphc (linear/bilinear and nearest are)": (
        "GridSample with mode='[^']*' is not imported by graphc \\(linear/bilinear and nearest are\\)",
        [
            'test_gridsample_bicubic',
            'test_gridsample_bicubic_align_corners_0_additional_1',
            'test_gridsample_bicubic_align_corners_1_additional_1',
        ]),
    "graph output '…' is a sequence or an optional value; a graphc plan's outputs are tensors (concatenate a sequence in the model: ConcatFromSequence)": (
        "graph output '[^']*' is a sequence or an optional value; a graphc plan's outputs are tensors \\(concatenate a sequence in the model: ConcatFromSequence\\)",
        [
            'test_split_to_sequence_1',
            'test_split_to_sequence_2',
            'test_split_to_sequence_nokeepdims',
        ]),
    'no reader for ONNX op Bernoulli': (
        "ONNX op 'Bernoulli'\\-\\d+ is not supported",
        [
            'test_bernoulli',
            'test_bernoulli_double',
            'test_bernoulli_seed',
        ]),
    'no reader for ONNX op Momentum': (
        "ONNX op 'Momentum'\\-\\d+ is not supported",
        [
            'test_momentum',
            'test_momentum_multiple',
            'test_nesterov_momentum',
        ]),
    'no reader for ONNX op RandomUniformLike': (
        "ONNX op 'RandomUniformLike'\\-\\d+ is not supported",
        [
            'test_bernoulli_double_expanded',
            'test_bernoulli_expanded',
            'test_bernoulli_seed_expanded',
        ]),
    'no reader for ONNX op RoiAlign': (
        "ONNX op 'RoiAlign'\\-\\d+ is not supported",
        [
            'test_roialign_aligned_false',
            'test_roialign_aligned_true',
            'test_roialign_mode_max',
        ]),
    'BatchNormalization in training mode: an imported model is an inference plan': (
        'BatchNormalization in training mode: an imported model is an inference plan',
        [
            'test_batchnorm_epsilon_training_mode',
            'test_batchnorm_example_training_mode',
        ]),
    'a shape that depends on the batch size is used as a tensor; graphc keeps shapes static apart from the batch dim': (
        'a shape that depends on the batch size is used as a tensor; graphc keeps shapes static apart from the batch dim',
        [
            'test_if_opt',
            'test_if_seq',
        ]),
    'no reader for ONNX op Adagrad': (
        "ONNX op 'Adagrad'\\-\\d+ is not supported",
        [
            'test_adagrad',
            'test_adagrad_multiple',
        ]),
    'no reader for ONNX op Adam': (
        "ONNX op 'Adam'\\-\\d+ is not supported",
        [
            'test_adam',
            'test_adam_multiple',
        ]),
    'no reader for ONNX op Gradient': (
        "ONNX op 'Gradient'\\-\\d+ is not supported",
        [
            'test_gradient_of_add',
            'test_gradient_of_add_and_mul',
        ]),
    'no reader for ONNX op TreeEnsemble': (
        "ONNX op 'TreeEnsemble'\\-\\d+ is not supported",
        [
            'test_ai_onnx_ml_tree_ensemble_set_membership',
            'test_ai_onnx_ml_tree_ensemble_single_tree',
        ]),
    "BitCast from int# to DOUBLE: graphc reinterprets the bits of integer types only (it has no op that views a float's bits)": (
        "BitCast from int\\d+ to DOUBLE: graphc reinterprets the bits of integer types only \\(it has no op that views a float's bits\\)",
        [
            'test_bitcast_int64_to_float64',
        ]),
    "BitCast from int# to FLOAT: graphc reinterprets the bits of integer types only (it has no op that views a float's bits)": (
        "BitCast from int\\d+ to FLOAT: graphc reinterprets the bits of integer types only \\(it has no op that views a float's bits\\)",
        [
            'test_bitcast_int32_to_float32',
        ]),
    'Col#Im of #-D blocks; graphc imports #-D ones (F.fold)': (
        'Col\\d+Im of \\d+\\-D blocks; graphc imports \\d+\\-D ones \\(F\\.fold\\)',
        [
            'test_col2im_5d',
        ]),
    'MaxUnpool with an output_shape input is not imported yet': (
        'MaxUnpool with an output_shape input is not imported yet',
        [
            'test_maxunpool_export_with_output_shape',
        ]),
    'SplitToSequence along the symbolic dim N': (
        'SplitToSequence along the symbolic dim N',
        [
            'test_sequence_model8',
        ]),
    'no reader for ONNX op MelWeightMatrix': (
        "ONNX op 'MelWeightMatrix'\\-\\d+ is not supported",
        [
            'test_melweightmatrix',
        ]),
}
